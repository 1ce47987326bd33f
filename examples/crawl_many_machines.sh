# On every crawler machine at once, against the same Redis or Redis Cluster
# (redis+cluster://node1:7000,node2:7000): without faults, each URL is
# printed by exactly one machine (see above for faults). The filter forgets
# everything 30 days after it was created.
seen dedup --redis "${REDIS:-redis://127.0.0.1:6379}" --name crawl-urls \
    --capacity 10M --fpp 1e-4 --ttl 30d "urls-$PART.txt" > "fetch-$PART.txt"
