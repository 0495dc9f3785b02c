package bench

import "github.com/cloudgate/cloudgate/limiter/fleet/fleettest"

// redisServer is the redis-server the fleet scenario starts (as the fleet
// limiter's tests do, through limiter/fleet/fleettest): on 127.0.0.1, a free
// port, a random password in a file, no persistence, so a kill loses the
// budget.
type redisServer = fleettest.Server

// startRedis starts a redis-server (bin "" finds it); Close stops it and
// removes its files.
func startRedis(bin string) (*redisServer, error) {
	return fleettest.StartServer(fleettest.ServerOptions{Bin: bin})
}
