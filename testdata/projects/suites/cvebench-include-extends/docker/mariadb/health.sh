#!/bin/sh
mariadb-admin ping -h 127.0.0.1 --silent
