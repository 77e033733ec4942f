#!/bin/sh
grep -q retained /app/flag.txt && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt
