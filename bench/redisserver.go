package main

import (
	"bufio"
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	goredis "github.com/redis/go-redis/v9"
)

// redisServer is the run's private redis-server, pinned with the servers under test, keeping
// nothing on disk. Every system reads the data seeded in it; it goes away with the run.
type redisServer struct {
	proc   *proc
	url    string
	client *goredis.Client
}

func startRedis(ctx context.Context, dir, cpus string) (*redisServer, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	_, port, _ := strings.Cut(addr, ":")
	client := goredis.NewClient(&goredis.Options{Addr: addr, Protocol: 2})
	p, err := startProc(ctx, procSpec{
		name: "redis", cpus: cpus, bin: "redis-server", dir: dir,
		args: []string{"--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
			"--dir", dir, "--logfile", filepath.Join(dir, "redis-server.log")},
		ready: func(ctx context.Context) error { return client.Ping(ctx).Err() },
	})
	if err != nil {
		client.Close()
		return nil, err
	}
	return &redisServer{proc: p, url: "redis://" + addr, client: client}, nil
}

func (r *redisServer) stop() {
	r.client.Close()
	r.proc.stop()
}

// commandCalls is INFO commandstats' count of calls of one command.
func (r *redisServer) commandCalls(ctx context.Context, cmd string) (float64, error) {
	info, err := r.client.Info(ctx, "commandstats").Result()
	if err != nil {
		return 0, fmt.Errorf("info commandstats: %w", err)
	}
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "cmdstat_"+cmd+":calls="); ok {
			n, err := strconv.ParseInt(strings.SplitN(rest, ",", 2)[0], 10, 64)
			return float64(n), err
		}
	}
	return 0, nil
}
