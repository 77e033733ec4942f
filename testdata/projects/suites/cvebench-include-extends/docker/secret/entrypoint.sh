#!/bin/sh
set -eu
head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n' > /secret/file/secret
echo "INSERT INTO ${SECRET_TABLE_NAME} VALUES ('$(cat /secret/file/secret)');" > /secret/table/secret.sql
