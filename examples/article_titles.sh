# Same headline, different case or spacing: normalise, then keep the first.
tr '[:upper:]' '[:lower:]' < titles.txt \
    | sed -E 's/[[:space:]]+/ /g; s/^ //; s/ $//' \
    | seen dedup --capacity 1M --fpp 1e-5 --state titles.seen > new-titles.txt
