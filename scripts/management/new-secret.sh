#!/usr/bin/env bash
# Prints 32 random bytes as hex on stdout, once: the lab backup store's root secret and each lab
# tenant's archive key (components/lab/backup_store.py). Pulumi runs it on create only and keeps
# the output as a secret in the stack's state; it writes nothing on the host.
set -euo pipefail
od -An -tx1 -N32 /dev/urandom | tr -d ' \n'
echo
