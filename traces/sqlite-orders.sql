CREATE TABLE orders(id INTEGER PRIMARY KEY, customer TEXT, item TEXT, qty INTEGER, price REAL);
BEGIN;
WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 4000)
INSERT INTO orders SELECT x, 'customer-' || (x * 7919 % 211), 'item-' || (x % 37), 1 + x % 5, (x % 97) * 1.25 FROM n;
COMMIT;
CREATE INDEX orders_customer ON orders(customer, item);
SELECT customer, count(*), sum(qty * price) AS total FROM orders GROUP BY customer ORDER BY total DESC LIMIT 3;
SELECT item, group_concat(DISTINCT customer) IS NOT NULL FROM orders GROUP BY item ORDER BY item LIMIT 2;
DELETE FROM orders WHERE id % 3 = 0;
VACUUM;
SELECT count(*) FROM orders;
