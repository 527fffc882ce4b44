package main

// A latency histogram each goroutine keeps for itself (no sharing while measuring), merged at
// the end: buckets of 1/16 of a power of two of microseconds, enough for percentiles to ~6 %.

import "math/bits"

const histBuckets = 40 * 16

type histogram struct {
	Counts [histBuckets]uint64
	N      uint64
	Max    uint64 // microseconds
}

func bucketOf(us uint64) int {
	if us < 16 {
		return int(us)
	}
	exp := 63 - bits.LeadingZeros64(us) // us in [2^exp, 2^(exp+1))
	sub := int((us >> (uint(exp) - 4)) & 15)
	b := (exp-3)*16 + sub
	if b >= histBuckets {
		return histBuckets - 1
	}
	return b
}

// lowerBound is the smallest value in bucket b.
func lowerBound(b int) uint64 {
	if b < 16 {
		return uint64(b)
	}
	exp := b/16 + 3
	sub := uint64(b % 16)
	return (uint64(1) << uint(exp)) + sub<<(uint(exp)-4)
}

func (h *histogram) record(us uint64) {
	h.Counts[bucketOf(us)]++
	h.N++
	if us > h.Max {
		h.Max = us
	}
}

func (h *histogram) merge(o *histogram) {
	for i := range h.Counts {
		h.Counts[i] += o.Counts[i]
	}
	h.N += o.N
	if o.Max > h.Max {
		h.Max = o.Max
	}
}

// percentileMs is the value below which a fraction q of the samples lie, in milliseconds.
func (h *histogram) percentileMs(q float64) float64 {
	if h.N == 0 {
		return 0
	}
	want := uint64(q * float64(h.N))
	var seen uint64
	for i, c := range h.Counts {
		seen += c
		if seen > want {
			return float64(lowerBound(i)) / 1000
		}
	}
	return float64(h.Max) / 1000
}
