//go:build race

package bench

// raceEnabled: the k8s.io/cloud-provider v0.37.2 service controller has a
// data race of its own (processServiceCreateOrUpdate writes
// cachedService.state without the cache's lock, controller.go:339, while
// syncNodes reads it under RLock in allServices, controller.go:503), so
// tests built with -race run without LoadBalancer services.
const raceEnabled = true
