#!/bin/bash
touch /app/app/__init__.py
