#!/bin/sh
[ "$(/app/run.sh)" = ok ]
