#!/bin/bash
grep -q SERVING /app/status.txt
