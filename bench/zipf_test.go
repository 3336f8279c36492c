package main

import (
	"bufio"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// harmonic is H(n, 1), summed from the small terms up.
func harmonic(n int) float64 {
	h := 0.0
	for k := n; k >= 1; k-- {
		h += 1 / float64(k)
	}
	return h
}

// TestZipfIntervals checks the exact probabilities: rank k owns (cdf[k-2], cdf[k-1]], whose
// width is (1/k) / H(n).
func TestZipfIntervals(t *testing.T) {
	for _, n := range []int{1, 2, 7, 1000, 1_000_000} {
		z := newZipf(n, 1)
		h := harmonic(n)
		for _, k := range []int{1, 2, 3, n / 2, n - 1, n} {
			if k < 1 || k > n {
				continue
			}
			lo := 0.0
			if k > 1 {
				lo = z.cdf[k-2]
			}
			hi := z.cdf[k-1]
			if want := 1 / float64(k) / h; math.Abs((hi-lo)-want) > 1e-12 {
				t.Errorf("n=%d: P(rank %d) = %g, want %g", n, k, hi-lo, want)
			}
			if got := z.rank(hi); got != k {
				t.Errorf("n=%d: rank(cdf[%d]) = %d, want %d", n, k-1, got, k)
			}
			if k > 1 {
				if got := z.rank(math.Nextafter(lo, 1)); got != k {
					t.Errorf("n=%d: rank just above cdf[%d] = %d, want %d", n, k-2, got, k)
				}
			}
		}
		if z.cdf[n-1] != 1 || z.rank(math.Nextafter(1, 0)) != n {
			t.Errorf("n=%d: the last rank does not end at 1", n)
		}
	}
}

// TestZipfDraws compares the frequencies of 400,000 draws (fixed seed) with the exact
// probabilities: ranks 1-30 one by one, then the rest in 10 bins, by a chi-square test at
// the 99.9% level.
func TestZipfDraws(t *testing.T) {
	const n, draws = 10_000, 400_000
	z := newZipf(n, 1)
	h := harmonic(n)
	bins := []int{} // upper rank of each bin
	for k := 1; k <= 30; k++ {
		bins = append(bins, k)
	}
	for _, edge := range []int{50, 100, 200, 400, 800, 1500, 3000, 5000, 7500, n} {
		bins = append(bins, edge)
	}
	observed := make([]float64, len(bins))
	rnd := rand.New(rand.NewPCG(7, 11))
	for range draws {
		r := z.rank(rnd.Float64())
		for i, upper := range bins {
			if r <= upper {
				observed[i]++
				break
			}
		}
	}
	chi2, lower := 0.0, 0
	for i, upper := range bins {
		p := 0.0
		for k := lower + 1; k <= upper; k++ {
			p += 1 / float64(k) / h
		}
		expected := p * draws
		chi2 += (observed[i] - expected) * (observed[i] - expected) / expected
		lower = upper
	}
	// 39 degrees of freedom: the 99.9% quantile of chi-square is 72.05.
	if chi2 > 72.05 {
		t.Errorf("chi-square %.1f over 40 bins, above the 99.9%% quantile (72.05)", chi2)
	}
}

func TestWriteZipfKeysIsRepeatable(t *testing.T) {
	z := newZipf(1000, 1)
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	for _, p := range []string{a, b} {
		if err := writeZipfKeys(p, z, 5000, 42); err != nil {
			t.Fatal(err)
		}
	}
	ka, kb := readKeys(t, a), readKeys(t, b)
	if len(ka) != 5000 {
		t.Fatalf("%d keys, want 5000", len(ka))
	}
	zeros := 0
	for i := range ka {
		if ka[i] != kb[i] {
			t.Fatalf("key %d differs between two runs with the same seed: %d, %d", i, ka[i], kb[i])
		}
		if ka[i] < 0 || ka[i] >= 1000 {
			t.Fatalf("key %d is %d, outside [0, 1000)", i, ka[i])
		}
		if ka[i] == 0 {
			zeros++
		}
	}
	// Index 0 is rank 1, drawn with probability 1/H(1000) = 13.4%.
	if share := float64(zeros) / 5000; share < 0.11 || share > 0.16 {
		t.Errorf("index 0 drawn %.1f%% of the time, want about 13.4%%", 100*share)
	}
}

func readKeys(t *testing.T, path string) []int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var keys []int
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, err := strconv.Atoi(sc.Text())
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
	}
	return keys
}
