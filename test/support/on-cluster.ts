// The jest project `Redis Cluster`: its suites' gateways use the test cluster (redis-cluster.ts).
process.env.TEST_REDIS_TARGET = 'cluster';
