#!/bin/sh
nc mqtt-broker 1883 </dev/null > /app/flag.txt
