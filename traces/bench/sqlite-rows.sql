-- An SQLite workload for throughput benchmarks: fill, index and query a
-- 300,000-row table. Recorded with
--   bfcsim record -o sqlite.jsonl -- sqlite3 :memory: < traces/bench/sqlite-rows.sql
-- SQLite 3.40.1, glibc 2.36, x86-64: about 5.15 million events (5,154,156
-- and 5,154,948 in two recordings: random() and randomblob() vary).
CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, v REAL, tag TEXT);
WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x<300000)
INSERT INTO t SELECT x, 'name' || x, random() % 1000 / 7.0, substr(hex(randomblob(16)), 1, (x % 30) + 2) FROM c;
CREATE INDEX t_tag ON t(tag);
SELECT count(*), sum(length(name)) FROM t WHERE tag LIKE 'A%';
SELECT tag, count(*) FROM t GROUP BY tag ORDER BY 2 DESC LIMIT 3;
UPDATE t SET name = name || '-x' WHERE id % 3 = 0;
SELECT group_concat(name, ',') IS NOT NULL FROM (SELECT name FROM t ORDER BY v LIMIT 50000);
