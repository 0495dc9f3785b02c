package gcesim

import (
	"fmt"
	"regexp"
	"strings"
)

// predicate is one "field eq|ne value" term of a list filter. Compute Engine's eq and ne
// compare the field with an RE2 regular expression that must match the whole value; = and !=
// compare literally (a quoted value is unquoted).
type predicate struct {
	field string
	neg   bool
	re    *regexp.Regexp
}

// filter is a conjunction of predicates; a nil filter matches everything.
type filter []predicate

// parseFilter parses the forms the Compute API documents for list filters and the GCE
// provider sends: "field op value" or "(field op value) (field op value) ...". fields
// names the fields the resource can be filtered on.
func parseFilter(expr string, fields map[string]bool) (filter, error) {
	expr = strings.TrimSpace(expr)
	if expr == "" {
		return nil, nil
	}
	var terms []string
	if strings.HasPrefix(expr, "(") {
		rest := expr
		for rest != "" {
			if !strings.HasPrefix(rest, "(") {
				return nil, fmt.Errorf("filter %q: expected '(' at %q", expr, rest)
			}
			end := strings.Index(rest, ")")
			// A regexp value may hold parentheses: the term ends at the ")" followed by " (" or the end.
			for end >= 0 && end+1 < len(rest) && !strings.HasPrefix(strings.TrimLeft(rest[end+1:], " "), "(") {
				next := strings.Index(rest[end+1:], ")")
				if next < 0 {
					end = -1
					break
				}
				end += 1 + next
			}
			if end < 0 {
				return nil, fmt.Errorf("filter %q: unbalanced parentheses", expr)
			}
			terms = append(terms, rest[1:end])
			rest = strings.TrimLeft(rest[end+1:], " ")
		}
	} else {
		terms = []string{expr}
	}
	var f filter
	for _, t := range terms {
		fs := strings.SplitN(strings.TrimSpace(t), " ", 3)
		if len(fs) != 3 {
			return nil, fmt.Errorf("filter %q: term %q is not \"field op value\"", expr, t)
		}
		field, op, value := fs[0], fs[1], strings.TrimSpace(fs[2])
		if !fields[field] {
			return nil, fmt.Errorf("filter %q: field %q is not simulated", expr, field)
		}
		p := predicate{field: field}
		switch op {
		case "eq", "ne":
			p.neg = op == "ne"
		case "=", "!=":
			p.neg = op == "!="
			value = regexp.QuoteMeta(strings.Trim(value, `"`))
		default:
			return nil, fmt.Errorf("filter %q: operator %q is not simulated", expr, op)
		}
		re, err := regexp.Compile("^(?:" + value + ")$")
		if err != nil {
			return nil, fmt.Errorf("filter %q: %w", expr, err)
		}
		p.re = re
		f = append(f, p)
	}
	return f, nil
}

// match reports whether the resource whose fields are given matches every predicate.
func (f filter) match(field func(string) string) bool {
	for _, p := range f {
		if p.re.MatchString(field(p.field)) == p.neg {
			return false
		}
	}
	return true
}
