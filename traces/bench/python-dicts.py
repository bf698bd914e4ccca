# A Python workload for throughput benchmarks: build, serialise and parse a
# list of small dicts. Recorded with every object through malloc:
#   PYTHONMALLOC=malloc bfcsim record -o py.jsonl -- python3 traces/bench/python-dicts.py
# CPython 3.11.7, glibc 2.36, x86-64: about 8.2 million events (8,171,431
# and 8,171,439 in two recordings), about 570,000 allocations live at the
# peak.
import json, random
random.seed(1)
data = []
for i in range(120000):
    d = {"id": i, "name": "item%d" % i, "tags": [str(random.random()) for _ in range(3)]}
    data.append(d)
    if len(data) > 20000:
        data = data[10000:]
s = json.dumps(data)
for _ in range(3):
    x = json.loads(s)
    s = json.dumps(x[::-1])
print(len(s))
