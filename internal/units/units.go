// Package units writes sizes and counts for people, one way everywhere:
// the command line, the studio and the server print a model's size or
// parameter count through it, so the same file reads the same in each.
//
// Sizes are in binary units (KiB, MiB, GiB), as GPU memory is sold and as
// the memory estimates are made; counts in the K/M/B/T of model cards.
// Both keep three significant digits and drop trailing zeros: "906 KiB",
// "1.5 GiB", "128 MiB", "1.44M", "8.03B".
package units

import (
	"strconv"
	"strings"
)

var (
	byteUnits  = []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	countUnits = []string{"", "K", "M", "B", "T", "P", "E"}
)

// Bytes is a byte count in binary units: "512 B", "906 KiB", "1.5 GiB".
func Bytes(n uint64) string {
	if n < 1024 {
		return strconv.FormatUint(n, 10) + " B"
	}
	v, unit := scale(n, 1024, byteUnits)
	return v + " " + unit
}

// Count is a count, such as a model's parameters, as model cards write it:
// "12", "200K", "1.44M", "8.03B".
func Count(n uint64) string {
	if n < 1000 {
		return strconv.FormatUint(n, 10)
	}
	v, unit := scale(n, 1000, countUnits)
	return v + unit
}

// scale divides n by base until it is under base and writes it with three
// significant digits. A value that rounds up to base (1023.7 KiB) moves to
// the next unit, so no size reads "1024 KiB".
func scale(n uint64, base float64, units []string) (string, string) {
	v, u := float64(n), 0
	for u < len(units)-1 && v >= base {
		v /= base
		u++
	}
	if u < len(units)-1 && v >= base-0.5 {
		v /= base
		u++
	}
	return threeDigits(v), units[u]
}

// threeDigits writes v (at least 1) with three significant digits and no
// trailing zeros.
func threeDigits(v float64) string {
	prec := 0
	switch {
	case v < 10:
		prec = 2
	case v < 100:
		prec = 1
	}
	s := strconv.FormatFloat(v, 'f', prec, 64)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}
