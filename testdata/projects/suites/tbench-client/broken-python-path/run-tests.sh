#!/bin/bash
cd /app && python3 -m app | grep -q hello
