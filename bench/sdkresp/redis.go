package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gomodule/redigo/redis"
)

// redisClient is one connection to the private Redis, for seeding it and reading its
// counters (redigo, which ldredis uses too: one Redis client library in this module).
type redisClient struct{ conn redis.Conn }

func dialRedis(addr string) (*redisClient, error) {
	c, err := redis.Dial("tcp", addr, redis.DialConnectTimeout(5*time.Second), redis.DialReadTimeout(30*time.Second))
	if err != nil {
		return nil, err
	}
	return &redisClient{conn: c}, nil
}

func (r *redisClient) Close() error { return r.conn.Close() }

func ping(addr string) error {
	c, err := dialRedis(addr)
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.conn.Do("PING")
	return err
}

// pipeline sends cmds in one go and reads every reply, failing on the first error.
func (r *redisClient) pipeline(cmds [][]any) error {
	for _, c := range cmds {
		if err := r.conn.Send(c[0].(string), c[1:]...); err != nil {
			return err
		}
	}
	if err := r.conn.Flush(); err != nil {
		return err
	}
	var first error
	for range cmds {
		if _, err := r.conn.Receive(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// commandCounts are INFO commandstats' calls, by command.
type commandCounts map[string]float64

// commandStats reads Redis's counts of the commands it has served, INFO itself left out.
func (r *redisClient) commandStats() (commandCounts, error) {
	info, err := redis.String(r.conn.Do("INFO", "commandstats"))
	if err != nil {
		return nil, fmt.Errorf("info commandstats: %w", err)
	}
	return parseCommandStats(info)
}

// parseCommandStats reads the calls of INFO commandstats's lines (cmdstat_get:calls=3,...).
func parseCommandStats(info string) (commandCounts, error) {
	counts := commandCounts{}
	for line := range strings.Lines(info) {
		name, rest, ok := strings.Cut(strings.TrimPrefix(strings.TrimSpace(line), "cmdstat_"), ":calls=")
		if !ok || name == "info" {
			continue
		}
		calls, _, _ := strings.Cut(rest, ",")
		n, err := strconv.ParseFloat(calls, 64)
		if err != nil {
			return nil, fmt.Errorf("info commandstats: %q: %w", line, err)
		}
		counts[name] = n
	}
	return counts, nil
}

func (c commandCounts) sub(o commandCounts) commandCounts {
	out := commandCounts{}
	for k, v := range c {
		if d := v - o[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

func (c commandCounts) total() float64 {
	sum := 0.0
	for _, v := range c {
		sum += v
	}
	return sum
}
