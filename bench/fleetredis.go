package bench

import "github.com/cloudgate/cloudgate/internal/redisserver"

// redisServer is the redis-server the fleet scenario starts (as
// limiter/fleet/fleettest does for tests, through internal/redisserver): on
// 127.0.0.1, a free port, a random password in a file, no persistence, so a
// kill loses the budget.
type redisServer = redisserver.Server

// startRedis starts a redis-server (bin "" finds it); Close stops it and
// removes its files.
func startRedis(bin string) (*redisServer, error) {
	return redisserver.Start(redisserver.Options{Bin: bin})
}
