package news

import (
	"sort"
	"strings"
)

// keywords maps phrases (lower case) to the futures roots they concern.
var keywords = map[string][]string{
	"s&p 500": {"ES"}, "s&p500": {"ES"}, "s&p": {"ES"}, "spx": {"ES"}, "wall street": {"ES", "NQ", "YM"}, "stocks": {"ES", "NQ"},
	"nasdaq": {"NQ"}, "tech stocks": {"NQ"}, "chipmakers": {"NQ"},
	"dow": {"YM"}, "dow jones": {"YM"}, "djia": {"YM"}, "blue chips": {"YM"},
	"russell 2000": {"RTY"}, "russell": {"RTY"}, "small caps": {"RTY"}, "small-cap": {"RTY"}, "small-caps": {"RTY"},
	"crude": {"CL"}, "oil": {"CL"}, "wti": {"CL"}, "opec": {"CL"}, "opec+": {"CL"}, "brent": {"CL"}, "barrels": {"CL"},
	"gold": {"GC"}, "bullion": {"GC"}, "precious metals": {"GC"},
	"treasury": {"ZN", "ZB", "ZF"}, "treasuries": {"ZN", "ZB", "ZF"}, "10-year": {"ZN"}, "ten-year": {"ZN"}, "t-note": {"ZN"},
	"30-year": {"ZB"}, "long bond": {"ZB"}, "5-year": {"ZF"}, "five-year": {"ZF"}, "yields": {"ZN"}, "bond": {"ZB"}, "bonds": {"ZB", "ZN"},
	"euro": {"6E"}, "eurozone": {"6E"}, "euro zone": {"6E"}, "ecb": {"6E"}, "eur/usd": {"6E"}, "lagarde": {"6E"},
	"federal reserve": {"ES", "NQ", "ZN"}, "fed": {"ES", "NQ", "ZN"}, "fomc": {"ES", "NQ", "ZN"}, "powell": {"ES", "NQ", "ZN"},
	"inflation": {"ES", "ZN", "GC"}, "cpi": {"ES", "ZN", "GC"}, "payrolls": {"ES", "ZN"}, "jobs report": {"ES", "ZN"},
}

func isWordChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
}

// containsWord reports whether phrase occurs in text with word boundaries.
func containsWord(text, phrase string) bool {
	for i := 0; ; {
		j := strings.Index(text[i:], phrase)
		if j < 0 {
			return false
		}
		start, end := i+j, i+j+len(phrase)
		before := start == 0 || !isWordChar(text[start-1])
		after := end == len(text) || !isWordChar(text[end])
		if before && after {
			return true
		}
		i = start + 1
	}
}

// Tag returns the futures roots a text concerns, merged with the given ones,
// sorted and without duplicates.
func Tag(text string, given ...string) []string {
	lower := strings.ToLower(text)
	set := map[string]bool{}
	for _, r := range given {
		if r = strings.ToUpper(strings.TrimSpace(r)); r != "" {
			set[r] = true
		}
	}
	for phrase, roots := range keywords {
		if containsWord(lower, phrase) {
			for _, r := range roots {
				set[r] = true
			}
		}
	}
	out := make([]string, 0, len(set))
	for r := range set {
		out = append(out, r)
	}
	sort.Strings(out)
	return out
}
