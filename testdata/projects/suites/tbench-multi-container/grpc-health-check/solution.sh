#!/bin/bash
nc server 9000 </dev/null > /app/status.txt
