// Package simcloud is a simulated, quota-limited cloud for cloudgate's load
// benchmark, chaos tests and end-to-end tests.
//
// It has two halves that talk HTTP/JSON over 127.0.0.1:
//
//   - Server is the cloud API. It holds instances, load balancers and routes,
//     charges every call to a server-side read or write token bucket (like a
//     real cloud account's API quota) and answers HTTP 429 with Retry-After
//     when the bucket is empty. A seeded latency model and runtime-settable
//     faults (errors, hangs, latency spikes, throttle storms, outages) make
//     chaos runs reproducible. Exact per-method counters and a log of every
//     write that landed are the ground truth the benchmark and tests assert
//     against.
//   - Cloud is a real cloudprovider.Interface over that API, registered as the
//     provider "simcloud". It implements Instances, InstancesV2, LoadBalancer,
//     Routes, Zones and Clusters; its InstancesV2 value also implements the
//     optional provider.BatchInstances and provider.InstanceLister
//     interfaces, so cloudgate can batch and prefetch against it.
//
// The files are named for their side, so that a provider's author reading
// this package as an example finds the client alone:
//
//   - server.go (Server, routing, quota, faults), server_handlers.go (one
//     handler per API method), server_data.go (instances, load balancers,
//     routes), server_counters.go (Counters, the write log),
//     server_config.go (ServerConfig, Faults);
//   - client.go (Cloud, ClientConfig, APIError, the HTTP call),
//     client_instances.go (Instances, InstancesV2 with batching and
//     listing, Zones), client_loadbalancer.go, client_routes.go (Routes,
//     Clusters), client_register.go (registration as "simcloud", the
//     cloud-config file);
//   - api.go: what both sides share: the API's method names, error codes,
//     headers and JSON wire types, provider IDs, names, Secret.
//
// The client keeps the contracts the CCM controllers rely on: a missing
// instance is exactly cloudprovider.InstanceNotFound (compare with ==), while
// a throttled or failed call is an *APIError, never "not found".
//
// Addresses handed out by the server (10.x.y.z node addresses, 203.0.113.x
// load-balancer ingress) are data only; nothing ever dials them.
package simcloud
