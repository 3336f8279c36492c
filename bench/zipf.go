package main

import (
	"bufio"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
)

// zipf draws ranks 1 … n with probability k^-s / H(n, s), by inverting the cumulative
// distribution. Go's math/rand Zipf needs s > 1; the traffic of a real fleet is closer to
// s = 1, where a few contexts are hot and most are seen once.
type zipf struct {
	cdf []float64 // cdf[k-1] is the probability of a rank <= k; cdf[n-1] is 1
}

func newZipf(n int, s float64) *zipf {
	cdf := make([]float64, n)
	sum := 0.0
	for k := 1; k <= n; k++ {
		sum += math.Pow(float64(k), -s)
		cdf[k-1] = sum
	}
	for i := range cdf {
		cdf[i] /= sum
	}
	cdf[n-1] = 1
	return &zipf{cdf: cdf}
}

// rank returns the rank whose share of [0, 1) holds u: the smallest k with u <= cdf[k-1].
func (z *zipf) rank(u float64) int {
	return sort.SearchFloat64s(z.cdf, u) + 1
}

// writeZipfKeys writes draws context indices (rank - 1), one per line, drawn with a fixed
// seed so that every run and every system sees the same sequence. wrk's script walks the file
// from a random offset of its own.
func writeZipfKeys(path string, z *zipf, draws int, seed uint64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	rnd := rand.New(rand.NewPCG(seed, seed))
	var line []byte
	for range draws {
		line = strconv.AppendInt(line[:0], int64(z.rank(rnd.Float64())-1), 10)
		line = append(line, '\n')
		if _, err := w.Write(line); err != nil {
			f.Close()
			return err
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("zipf keys: %w", err)
	}
	return nil
}
