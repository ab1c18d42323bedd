package units

import "testing"

func TestBytes(t *testing.T) {
	for _, c := range []struct {
		n    uint64
		want string
	}{
		{0, "0 B"},
		{512, "512 B"},
		{1023, "1023 B"},
		{1024, "1 KiB"},
		{1536, "1.5 KiB"},
		{906016, "885 KiB"},    // 884.78 KiB: the tiny-llama Q4_K_M file
		{1047552, "1023 KiB"},  // 1023 KiB exactly
		{1048064, "1 MiB"},     // 1023.5 KiB would print as 1024 KiB
		{128 << 20, "128 MiB"}, // lavapipe's storage binding limit
		{3 << 29, "1.5 GiB"},
		{2 << 30, "2 GiB"},
		{1 << 40, "1 TiB"},
		{1<<64 - 1, "16 EiB"},
	} {
		if got := Bytes(c.n); got != c.want {
			t.Errorf("Bytes(%d) = %q, want %q", c.n, got, c.want)
		}
	}
}

func TestCount(t *testing.T) {
	for _, c := range []struct {
		n    uint64
		want string
	}{
		{0, "0"},
		{12, "12"},
		{999, "999"},
		{1000, "1K"},
		{199_710, "200K"},
		{999_600, "1M"}, // 999.6K would print as 1000K
		{1_443_104, "1.44M"},
		{494_032_768, "494M"},
		{1_235_814_400, "1.24B"},
		{8_030_261_248, "8.03B"},
		{12_000_000_000_000, "12T"},
	} {
		if got := Count(c.n); got != c.want {
			t.Errorf("Count(%d) = %q, want %q", c.n, got, c.want)
		}
	}
}
