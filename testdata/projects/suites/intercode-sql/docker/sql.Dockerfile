FROM mysql:8.0
ENV MYSQL_ROOT_PASSWORD="password"
ADD ./data/sql/ic_spider_dbs.sql /docker-entrypoint-initdb.d
