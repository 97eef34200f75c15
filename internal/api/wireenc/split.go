package wireenc

import "encoding/json"

// SplitObject cuts a JSON object into its members as json.Unmarshal into a
// map[string]json.RawMessage would, without reflection: every HTTP request
// body and WebSocket command goes through here. It answers false for
// anything it does not take apart itself (a name with escapes or non-ASCII
// bytes, a name given twice, or text that is not a well-formed object),
// and the caller then uses json.Unmarshal, for its decoding and its errors.
func SplitObject(raw []byte) (map[string]json.RawMessage, bool) {
	if len(raw) < 2 || raw[0] != '{' {
		return nil, false
	}
	m := make(map[string]json.RawMessage, 8)
	i := skipJSONSpace(raw, 1)
	if i < len(raw) && raw[i] == '}' {
		return m, i+1 == len(raw)
	}
	for {
		if i >= len(raw) || raw[i] != '"' {
			return nil, false
		}
		end, plain := scanJSONString(raw, i)
		if end < 0 || !plain {
			return nil, false
		}
		key := string(raw[i+1 : end-1])
		if _, dup := m[key]; dup {
			return nil, false // strict decoders see every occurrence: theirs to judge
		}
		i = skipJSONSpace(raw, end)
		if i >= len(raw) || raw[i] != ':' {
			return nil, false
		}
		i = skipJSONSpace(raw, i+1)
		vend := skipJSONValue(raw, i)
		if vend < 0 {
			return nil, false
		}
		m[key] = raw[i:vend:vend]
		i = skipJSONSpace(raw, vend)
		if i >= len(raw) {
			return nil, false
		}
		switch raw[i] {
		case ',':
			i = skipJSONSpace(raw, i+1)
		case '}':
			return m, i+1 == len(raw)
		default:
			return nil, false
		}
	}
}

func skipJSONSpace(b []byte, i int) int {
	for i < len(b) && isJSONSpace(b[i]) {
		i++
	}
	return i
}

// scanJSONString answers the index after the string starting at b[i] (a
// quote), -1 if it does not end; plain is false when it holds an escape,
// a control or a non-ASCII byte (json.Unmarshal would rewrite those).
func scanJSONString(b []byte, i int) (end int, plain bool) {
	plain = true
	for i++; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			return i + 1, plain
		case c == '\\':
			plain = false
			i++ // the escaped byte cannot end the string
		case c < 0x20 || c >= 0x80:
			plain = false
		}
	}
	return -1, false
}

// skipJSONValue answers the index after the value starting at b[i], -1 if
// it is cut short. Literals and numbers end at a delimiter; they are not
// checked here (json.Valid checked the body, and the fields' readers parse
// them).
func skipJSONValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		end, _ := scanJSONString(b, i)
		return end
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				end, _ := scanJSONString(b, i)
				if end < 0 {
					return -1
				}
				i = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
		return -1
	default:
		start := i
		for i < len(b) && !isJSONSpace(b[i]) && b[i] != ',' && b[i] != '}' && b[i] != ']' {
			i++
		}
		if i == start {
			return -1
		}
		return i
	}
}

func isJSONSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// Member is one member of a JSON object: its name (plain, as SplitObject
// takes it) and its value's text, both slices of the object's text.
type Member struct {
	Name, Value []byte
}

// maxMembers bounds AppendMembers: its check for a repeated name is
// quadratic, so larger objects go to SplitObject's map.
const maxMembers = 16

// AppendMembers is SplitObject without the map: it appends the object's
// members to dst in their order, taking and refusing exactly what
// SplitObject does, and also refusing an object of more than 16 members.
// Given a stack array as dst it allocates nothing, which matters on the
// paths every WebSocket command takes (docs/benchmarks.md).
func AppendMembers(dst []Member, raw []byte) ([]Member, bool) {
	if len(raw) < 2 || raw[0] != '{' {
		return dst, false
	}
	first := len(dst)
	i := skipJSONSpace(raw, 1)
	if i < len(raw) && raw[i] == '}' {
		return dst, i+1 == len(raw)
	}
	for {
		if i >= len(raw) || raw[i] != '"' || len(dst)-first >= maxMembers {
			return dst, false
		}
		end, plain := scanJSONString(raw, i)
		if end < 0 || !plain {
			return dst, false
		}
		name := raw[i+1 : end-1 : end-1]
		for _, m := range dst[first:] {
			if string(m.Name) == string(name) {
				return dst, false // strict decoders see every occurrence: theirs to judge
			}
		}
		i = skipJSONSpace(raw, end)
		if i >= len(raw) || raw[i] != ':' {
			return dst, false
		}
		i = skipJSONSpace(raw, i+1)
		vend := skipJSONValue(raw, i)
		if vend < 0 {
			return dst, false
		}
		dst = append(dst, Member{Name: name, Value: raw[i:vend:vend]})
		i = skipJSONSpace(raw, vend)
		if i >= len(raw) {
			return dst, false
		}
		switch raw[i] {
		case ',':
			i = skipJSONSpace(raw, i+1)
		case '}':
			return dst, i+1 == len(raw)
		default:
			return dst, false
		}
	}
}
