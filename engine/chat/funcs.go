package chat

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ardanlabs/jinja"
)

// filterToJSON is the tojson filter transformers installs: Python's
// json.dumps(x, ensure_ascii=False, indent=indent, separators=separators,
// sort_keys=sort_keys), byte for byte.
func filterToJSON(args []jinja.Value, kwargs map[string]jinja.Value) (jinja.Value, error) {
	if len(args) == 0 {
		return jinja.Undefined(), fmt.Errorf("tojson: no value")
	}
	var e jsonEncoder
	e.itemSep, e.keySep = ", ", ": "
	if v, ok := kwargs["ensure_ascii"]; ok {
		e.ensureASCII = v.IsTruthy()
	}
	if v, ok := kwargs["sort_keys"]; ok {
		e.sortKeys = v.IsTruthy()
	}
	if v, ok := kwargs["indent"]; ok && !v.IsNone() && !v.IsUndefined() {
		switch {
		case v.IsInt():
			e.indent = strings.Repeat(" ", max(0, int(v.AsInt())))
		case v.IsString():
			e.indent = v.AsString()
		default:
			return jinja.Undefined(), fmt.Errorf("tojson: indent must be an integer or a string")
		}
		e.indented = true
		e.itemSep = ","
	}
	if v, ok := kwargs["separators"]; ok && !v.IsNone() && !v.IsUndefined() {
		if !v.IsList() || v.AsList().Len() != 2 || !v.AsList().Items[0].IsString() || !v.AsList().Items[1].IsString() {
			return jinja.Undefined(), fmt.Errorf("tojson: separators must be two strings")
		}
		e.itemSep, e.keySep = v.AsList().Items[0].AsString(), v.AsList().Items[1].AsString()
	}
	if err := e.encode(args[0], 0); err != nil {
		return jinja.Undefined(), err
	}
	return jinja.NewString(e.sb.String()), nil
}

type jsonEncoder struct {
	sb              strings.Builder
	itemSep, keySep string
	indent          string
	indented        bool
	sortKeys        bool
	ensureASCII     bool
}

func (e *jsonEncoder) newline(level int) {
	if e.indented {
		e.sb.WriteByte('\n')
		for range level {
			e.sb.WriteString(e.indent)
		}
	}
}

func (e *jsonEncoder) encode(v jinja.Value, level int) error {
	switch {
	case v.IsNone(), v.IsUndefined():
		e.sb.WriteString("null")
	case v.IsBool():
		if v.AsBool() {
			e.sb.WriteString("true")
		} else {
			e.sb.WriteString("false")
		}
	case v.IsInt():
		e.sb.WriteString(strconv.FormatInt(v.AsInt(), 10))
	case v.IsFloat():
		e.sb.WriteString(pyFloat(v.AsFloat()))
	case v.IsString():
		e.str(v.AsString())
	case v.IsList():
		items := v.AsList().Items
		if len(items) == 0 {
			e.sb.WriteString("[]")
			return nil
		}
		e.sb.WriteByte('[')
		for i, it := range items {
			if i > 0 {
				e.sb.WriteString(e.itemSep)
			}
			e.newline(level + 1)
			if err := e.encode(it, level+1); err != nil {
				return err
			}
		}
		e.newline(level)
		e.sb.WriteByte(']')
	case v.IsDict():
		d := v.AsDict()
		keys := d.OrderedKeys()
		if len(keys) == 0 {
			e.sb.WriteString("{}")
			return nil
		}
		if e.sortKeys {
			keys = append([]string(nil), keys...)
			sort.Strings(keys)
		}
		e.sb.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				e.sb.WriteString(e.itemSep)
			}
			e.newline(level + 1)
			e.str(k)
			e.sb.WriteString(e.keySep)
			val, _ := d.Get(k)
			if err := e.encode(val, level+1); err != nil {
				return err
			}
		}
		e.newline(level)
		e.sb.WriteByte('}')
	default:
		return fmt.Errorf("tojson: %s is not JSON serializable", v.String())
	}
	return nil
}

// str writes s as Python's json module does: the two-character escapes
// for \b \f \n \r \t, \u00XX for other control characters, and, only with
// ensure_ascii, \uXXXX (surrogate pairs above U+FFFF) for non-ASCII.
func (e *jsonEncoder) str(s string) {
	e.sb.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			e.sb.WriteString(`\"`)
		case '\\':
			e.sb.WriteString(`\\`)
		case '\b':
			e.sb.WriteString(`\b`)
		case '\f':
			e.sb.WriteString(`\f`)
		case '\n':
			e.sb.WriteString(`\n`)
		case '\r':
			e.sb.WriteString(`\r`)
		case '\t':
			e.sb.WriteString(`\t`)
		default:
			switch {
			case r < 0x20:
				fmt.Fprintf(&e.sb, `\u%04x`, r)
			case r < utf8.RuneSelf || !e.ensureASCII:
				e.sb.WriteRune(r)
			case r > 0xFFFF:
				r -= 0x10000
				fmt.Fprintf(&e.sb, `\u%04x\u%04x`, 0xD800+(r>>10), 0xDC00+(r&0x3FF))
			default:
				fmt.Fprintf(&e.sb, `\u%04x`, r)
			}
		}
	}
	e.sb.WriteByte('"')
}

// pyFloat is Python's repr of a float, as json.dumps writes it: the
// shortest digits that read back the same, in positional notation from
// 1e-4 up to 1e16 (with ".0" if whole) and scientific outside it.
func pyFloat(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	if f == 0 {
		if math.Signbit(f) {
			return "-0.0"
		}
		return "0.0"
	}
	sci := strconv.FormatFloat(f, 'e', -1, 64)
	exp, _ := strconv.Atoi(sci[strings.LastIndexByte(sci, 'e')+1:])
	if exp < -4 || exp >= 16 {
		return sci
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.ContainsAny(s, ".") {
		s += ".0"
	}
	return s
}

// strftime formats t as C's strftime does in the C locale (what
// transformers' strftime_now calls through Python), for the directives
// chat templates use, plus glibc's "%-d" style unpadded forms. An unknown
// directive is written as it is.
func strftime(format string, t time.Time) string {
	var sb strings.Builder
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c != '%' || i+1 == len(format) {
			sb.WriteByte(c)
			continue
		}
		i++
		pad := true
		if format[i] == '-' && i+1 < len(format) {
			pad = false
			i++
		}
		num := func(n, width int) {
			s := strconv.Itoa(n)
			if pad {
				for len(s) < width {
					s = "0" + s
				}
			}
			sb.WriteString(s)
		}
		switch format[i] {
		case 'a':
			sb.WriteString(t.Weekday().String()[:3])
		case 'A':
			sb.WriteString(t.Weekday().String())
		case 'b', 'h':
			sb.WriteString(t.Month().String()[:3])
		case 'B':
			sb.WriteString(t.Month().String())
		case 'd':
			num(t.Day(), 2)
		case 'e':
			if pad {
				fmt.Fprintf(&sb, "%2d", t.Day())
			} else {
				num(t.Day(), 1)
			}
		case 'H':
			num(t.Hour(), 2)
		case 'I':
			h := t.Hour() % 12
			if h == 0 {
				h = 12
			}
			num(h, 2)
		case 'j':
			num(t.YearDay(), 3)
		case 'm':
			num(int(t.Month()), 2)
		case 'M':
			num(t.Minute(), 2)
		case 'p':
			if t.Hour() < 12 {
				sb.WriteString("AM")
			} else {
				sb.WriteString("PM")
			}
		case 'S':
			num(t.Second(), 2)
		case 'y':
			num(t.Year()%100, 2)
		case 'Y':
			sb.WriteString(strconv.Itoa(t.Year()))
		case 'F':
			sb.WriteString(t.Format("2006-01-02"))
		case 'T':
			sb.WriteString(t.Format("15:04:05"))
		case 'D':
			sb.WriteString(t.Format("01/02/06"))
		case 'u':
			wd := int(t.Weekday())
			if wd == 0 {
				wd = 7
			}
			num(wd, 1)
		case 'w':
			num(int(t.Weekday()), 1)
		case 'Z':
			name, _ := t.Zone()
			sb.WriteString(name)
		case 'z':
			sb.WriteString(t.Format("-0700"))
		case '%':
			sb.WriteByte('%')
		default:
			sb.WriteByte('%')
			if !pad {
				sb.WriteByte('-')
			}
			sb.WriteByte(format[i])
		}
	}
	return sb.String()
}
