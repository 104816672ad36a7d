"""One module per scenario of bench/WORKLOADS.md, each holding only what is its own: its data
set, its requests, its cases, its ratios and targets, and the published figures. The runner
(runner.py) gives each its context; bench/<scenario>/run is the command.

  s000             GET /ptable?limit=10 beside PostgREST (--jwt, --sweep)   bench/s000/run
  s001             the API-key check                                          bench/s001/run
  s002             master-detail reads and inserts                             bench/s002/run
  cache            s000-cached, s002-cached; cache_invalidation: s002-invalidation   bench/cache/run
  write_cost       a write under each change feed of the cache                bench/cache/write-cost
  s003_static      small files beside the ceiling                             bench/s003/run
  s003_image       a PNG resized per request, beside PocketBase's thumbnails  bench/s003/image
  s003_customers   one user's 500 customers, PostgreSQL and SQLite            bench/s003/customers
  s004             PocketBase's benchmark beside PocketBase (s004_data: its data and servers)   bench/s004/run
  s004_cache       the response cache on SQLite                               bench/s004/cache
"""
