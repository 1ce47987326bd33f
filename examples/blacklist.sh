# Build the blacklist filter once (prints how many distinct entries it holds).
seen dedup --capacity 1M --fpp 1e-6 --state blacklist.seen --count < blacklist.txt
# Check candidates without adding them: print those on the blacklist.
seen dedup --state blacklist.seen --read-only --print-dups < candidates.txt > blocked.txt
