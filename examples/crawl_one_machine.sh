# Day 1: fetch every URL once. The filter is saved to crawl.seen at the end.
seen dedup --capacity 10M --fpp 1e-4 --state crawl.seen day1-urls.txt > fetch-day1.txt
# Day 2: only URLs fetched neither on day 1 nor earlier today.
seen dedup --state crawl.seen day2-urls.txt > fetch-day2.txt
# How full is it? (exit status 1 once it is past its capacity)
seen inspect --check crawl.seen
