package phonemes

import "testing"

func TestNormalize(t *testing.T) {
	cases := []struct{ in, want string }{
		{"I have 3 cats.", "I have three cats."},
		{"It costs $5.50, not $1.", "It costs five dollars and fifty cents, not one dollar."},
		{"$0.99 and £2.01 and €3", "ninety-nine cents and two pounds and one penny and three euros"},
		{"$1.5 million", "one point five dollars million"},
		{"Pi is 3.14159", "Pi is three point one four one five nine"},
		{"1,234,567 people", "one million two hundred thirty-four thousand five hundred sixty-seven people"},
		{"50% off, 3.5% APR", "fifty percent off, three point five percent APR"},
		{"the 1st, 2nd, 3rd, 4th, 11th, 12th, 21st, 100th and 1000000th",
			"the first, second, third, fourth, eleventh, twelfth, twenty-first, one hundredth and one millionth"},
		{"In 1984, 1900, 1905, 2000, 2007 and 2024.", "In nineteen eighty-four, nineteen hundred, nineteen oh five, two thousand, two thousand seven and twenty twenty-four."},
		{"the 1990s", "the nineteen nineties"},
		{"10000 and 999 and 0 and 007", "ten thousand and nine hundred ninety-nine and zero and zero zero seven"},
		{"It's -5 degrees", "It's minus five degrees"},
		{"at 3:30, 3:05 or 12:00", "at three thirty, three oh five or twelve o'clock"},
		{"Mr. Smith met Dr. Jones and Mrs. Brown.", "mister Smith met doctor Jones and missus Brown."},
		{"apples, pears, etc. are fruit", "apples, pears, et cetera are fruit"},
		{"fruit, e.g. apples; i.e. food", "fruit, for example apples; that is food"},
		{"the U.S.A. is big", "the U.S.A is big"},
		{"at 5 p.m. today", "at five p.m today"},
		{"Tom & Jerry", "Tom and Jerry"},
		{"Wait... what?! Really", "Wait… what?! Really"},
		{"yes -- no - maybe—fine", "yes — no — maybe—fine"},
		{"don’t rock-solid", "don't rock-solid"},
		{"a\tb\x00c\x07d", "a b c d"},
		{"line one\nline two", "line one\nline two"},
		{"emoji 🙂 #tag *bold*", "emoji tag bold"},
		{"", ""},
		{"...!?", "…!?"},
	}
	for _, c := range cases {
		if got := Normalize(c.in); got != c.want {
			t.Errorf("Normalize(%q)\n got %q\nwant %q", c.in, got, c.want)
		}
	}
}

func TestTokenizeBreaks(t *testing.T) {
	toks := tokenize(`He said "Stop." Then Mr. X left?! OK`)
	var ends []string
	for _, tk := range toks {
		if tk.brk == breakSentence {
			ends = append(ends, tk.text)
		}
	}
	// The sentence ends after the closing quote and after "!", never at
	// "Mr.".
	if len(ends) != 2 || ends[0] != `"` || ends[1] != "!" {
		t.Errorf("sentence ends at %q", ends)
	}
}
