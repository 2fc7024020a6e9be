#!/bin/sh
# Fails when libcc exports a dynamic symbol that does not start with cc_.
nm="$1"; lib="$2"
bad=$("$nm" -D --defined-only "$lib" | awk '{print $3}' | grep -v '^cc_' | grep -v '^$')
if [ -n "$bad" ]; then
  echo "libcc exports symbols outside the cc_ prefix:"; echo "$bad" | head -20; exit 1
fi
count=$("$nm" -D --defined-only "$lib" | grep -c ' cc_')
echo "libcc exports $count cc_* symbols and nothing else"
[ "$count" -gt 30 ]
