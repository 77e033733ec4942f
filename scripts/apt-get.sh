#!/usr/bin/env bash
# apt-get on the host, one at a time: make test's tracks install what they need concurrently
# (the cluster's tools, the Python test modules, the trixie root's debootstrap), and dpkg
# refuses a second apt-get while one runs ("Could not get lock /var/lib/dpkg/lock-frontend").
# Ours wait for each other on a lock of their own; apt's own lock timeout covers any other
# (unattended upgrades).
exec flock /run/lock/composebox-apt.lock apt-get -o DPkg::Lock::Timeout=600 "$@"
