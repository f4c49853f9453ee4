package verify

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/iceberg-maintainer/maintainer/internal/testenv/avrofile"
)

// Canonical values depend only on the Iceberg type and the logical value,
// not on how a file stores it, so rewriting files keeps the checksum. A
// canonical value is nil (null), a bool, a string, an int (a field id) or
// an []any; see the package comment for the forms.

var decimalType = regexp.MustCompile(`^decimal\(\s*(\d+)\s*,\s*(\d+)\s*\)$`)

// fieldIDKey is the Arrow field metadata key pqarrow puts Parquet field ids in.
const fieldIDKey = "PARQUET:field_id"

func arrowFieldID(f arrow.Field) (int, bool) {
	v, ok := f.Metadata.GetValue(fieldIDKey)
	if !ok {
		return 0, false
	}
	id, err := strconv.Atoi(v)
	return id, err == nil
}

// canonArrow is the canonical value of row i of arr for Iceberg type t.
func canonArrow(arr arrow.Array, i int, t *icebergType) (any, error) {
	if arr.IsNull(i) {
		return nil, nil
	}
	if ext, ok := arr.(array.ExtensionArray); ok {
		arr = ext.Storage()
	}
	if d, ok := arr.(*array.Dictionary); ok {
		arr, i = d.Dictionary(), d.GetValueIndex(i)
	}
	switch t.Kind {
	case "struct":
		s, ok := arr.(*array.Struct)
		if !ok {
			return nil, fmt.Errorf("struct column stored as %s", arr.DataType())
		}
		st := s.DataType().(*arrow.StructType)
		byID, byName := map[int]int{}, map[string]int{}
		for j, f := range st.Fields() {
			if id, ok := arrowFieldID(f); ok {
				byID[id] = j
			}
			byName[f.Name] = j
		}
		out := make([]any, 0, len(t.Fields))
		for _, f := range t.Fields {
			j, ok := byID[f.ID]
			if !ok && len(byID) == 0 {
				j, ok = byName[f.Name]
			}
			var v any
			if ok {
				var err error
				if v, err = canonArrow(s.Field(j), i, &f.Type); err != nil {
					return nil, err
				}
			}
			out = append(out, []any{f.ID, v})
		}
		return out, nil
	case "list":
		l, ok := arr.(array.ListLike)
		if !ok {
			return nil, fmt.Errorf("list column stored as %s", arr.DataType())
		}
		start, end := l.ValueOffsets(i)
		out := make([]any, 0, end-start)
		for j := start; j < end; j++ {
			v, err := canonArrow(l.ListValues(), int(j), t.Element)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	case "map":
		m, ok := arr.(*array.Map)
		if !ok {
			return nil, fmt.Errorf("map column stored as %s", arr.DataType())
		}
		start, end := m.ValueOffsets(i)
		type kv struct {
			key  string // JSON text of the canonical key, the sort key
			pair []any
		}
		entries := make([]kv, 0, end-start)
		for j := start; j < end; j++ {
			k, err := canonArrow(m.Keys(), int(j), t.Key)
			if err != nil {
				return nil, err
			}
			v, err := canonArrow(m.Items(), int(j), t.Value)
			if err != nil {
				return nil, err
			}
			entries = append(entries, kv{string(appendJSON(nil, k)), []any{k, v}})
		}
		slices.SortStableFunc(entries, func(a, b kv) int { return strings.Compare(a.key, b.key) })
		out := make([]any, len(entries))
		for j, e := range entries {
			out[j] = e.pair
		}
		return out, nil
	case "":
		return canonPrimitive(arr, i, t.Primitive)
	}
	return nil, fmt.Errorf("unsupported Iceberg type %s", t)
}

func canonPrimitive(arr arrow.Array, i int, t string) (any, error) {
	switch t {
	case "boolean":
		if b, ok := arr.(*array.Boolean); ok {
			return b.Value(i), nil
		}
	case "int", "long":
		if n, ok := integer(arr, i); ok {
			return strconv.FormatInt(n, 10), nil
		}
	case "float", "double":
		var v float64
		switch a := arr.(type) {
		case *array.Float32:
			v = float64(a.Value(i))
		case *array.Float64:
			v = a.Value(i)
		default:
			return nil, typeMismatch(arr, t)
		}
		return floatBits(v, t == "float"), nil
	case "date":
		switch a := arr.(type) {
		case *array.Date32:
			return strconv.FormatInt(int64(a.Value(i)), 10), nil
		case *array.Date64:
			return strconv.FormatInt(floorDiv(int64(a.Value(i)), 86400000), 10), nil
		}
		if n, ok := integer(arr, i); ok {
			return strconv.FormatInt(n, 10), nil
		}
	case "time":
		switch a := arr.(type) {
		case *array.Time32:
			n := int64(a.Value(i))
			if a.DataType().(*arrow.Time32Type).Unit == arrow.Millisecond {
				n *= 1000
			}
			return strconv.FormatInt(n, 10), nil
		case *array.Time64:
			return strconv.FormatInt(int64(a.Value(i)), 10), nil
		}
		if n, ok := integer(arr, i); ok {
			return strconv.FormatInt(n, 10), nil
		}
	case "timestamp", "timestamptz", "timestamp_ns", "timestamptz_ns":
		perSecond := int64(1_000_000)
		if strings.HasSuffix(t, "_ns") {
			perSecond = 1_000_000_000
		}
		if a, ok := arr.(*array.Timestamp); ok {
			n := int64(a.Value(i))
			switch unit := a.DataType().(*arrow.TimestampType).Unit; {
			case unit == arrow.Nanosecond && perSecond < 1e9:
				n = floorDiv(n, 1000)
			case unit != arrow.Nanosecond:
				n *= perSecond / int64(time.Second/unit.Multiplier())
			}
			return strconv.FormatInt(n, 10), nil
		}
		if n, ok := integer(arr, i); ok {
			return strconv.FormatInt(n, 10), nil
		}
	case "string":
		if b, ok := bytesValue(arr, i); ok {
			return validUTF8(b), nil
		}
	case "uuid":
		if s, ok := arr.(*array.String); ok && len(s.Value(i)) == 36 {
			return strings.ToLower(s.Value(i)), nil
		}
		if b, ok := bytesValue(arr, i); ok {
			return formatUUID(b), nil
		}
	case "binary":
		if b, ok := bytesValue(arr, i); ok {
			return hex.EncodeToString(b), nil
		}
	default:
		if strings.HasPrefix(t, "fixed[") {
			if b, ok := bytesValue(arr, i); ok {
				return hex.EncodeToString(b), nil
			}
			break
		}
		m := decimalType.FindStringSubmatch(t)
		if m == nil {
			return nil, fmt.Errorf("unsupported Iceberg type %s", t)
		}
		scale, _ := strconv.Atoi(m[2])
		var unscaled *big.Int
		switch a := arr.(type) {
		case *array.Decimal128:
			if s := int(a.DataType().(*arrow.Decimal128Type).Scale); s != scale {
				return nil, fmt.Errorf("decimal scale mismatch: file %d, table %d", s, scale)
			}
			unscaled = a.Value(i).BigInt()
		case *array.Decimal256:
			if s := int(a.DataType().(*arrow.Decimal256Type).Scale); s != scale {
				return nil, fmt.Errorf("decimal scale mismatch: file %d, table %d", s, scale)
			}
			unscaled = a.Value(i).BigInt()
		default:
			if n, ok := integer(arr, i); ok {
				unscaled = big.NewInt(n)
			} else if b, ok := bytesValue(arr, i); ok {
				unscaled = unscaledFromBytes(b)
			} else {
				return nil, typeMismatch(arr, t)
			}
		}
		return formatDecimal(unscaled, scale), nil
	}
	return nil, typeMismatch(arr, t)
}

func typeMismatch(arr arrow.Array, t string) error {
	return fmt.Errorf("column of Iceberg type %s stored as %s", t, arr.DataType())
}

func integer(arr arrow.Array, i int) (int64, bool) {
	switch a := arr.(type) {
	case *array.Int8:
		return int64(a.Value(i)), true
	case *array.Int16:
		return int64(a.Value(i)), true
	case *array.Int32:
		return int64(a.Value(i)), true
	case *array.Int64:
		return a.Value(i), true
	case *array.Uint8:
		return int64(a.Value(i)), true
	case *array.Uint16:
		return int64(a.Value(i)), true
	case *array.Uint32:
		return int64(a.Value(i)), true
	case *array.Uint64:
		return int64(a.Value(i)), true
	}
	return 0, false
}

func bytesValue(arr arrow.Array, i int) ([]byte, bool) {
	switch a := arr.(type) {
	case *array.String:
		return []byte(a.Value(i)), true
	case *array.LargeString:
		return []byte(a.Value(i)), true
	case *array.Binary:
		return a.Value(i), true
	case *array.LargeBinary:
		return a.Value(i), true
	case *array.FixedSizeBinary:
		return a.Value(i), true
	}
	return nil, false
}

// canonConstant is the canonical value of a partition value (a raw Avro
// value) or an initial default (already turned into one by rawDefault).
func canonConstant(v any, t *icebergType) (any, error) {
	if v == nil {
		return nil, nil
	}
	if t.Kind != "" {
		return nil, fmt.Errorf("a %s constant is not supported", t.Kind)
	}
	n, isInt := avrofile.Int(v)
	b, isBytes := v.([]byte)
	s, isString := v.(string)
	switch p := t.Primitive; {
	case p == "boolean":
		if x, ok := v.(bool); ok {
			return x, nil
		}
	case p == "int" || p == "long" || p == "date" || p == "time" || strings.HasPrefix(p, "timestamp"):
		if isInt {
			return strconv.FormatInt(n, 10), nil
		}
	case p == "float" || p == "double":
		switch x := v.(type) {
		case float32:
			return floatBits(float64(x), p == "float"), nil
		case float64:
			return floatBits(x, p == "float"), nil
		}
		if isInt {
			return floatBits(float64(n), p == "float"), nil
		}
	case p == "string":
		if isString {
			return validUTF8([]byte(s)), nil
		}
		if isBytes {
			return validUTF8(b), nil
		}
	case p == "uuid":
		if isString && len(s) == 36 {
			return strings.ToLower(s), nil
		}
		if isBytes {
			return formatUUID(b), nil
		}
	case p == "binary" || strings.HasPrefix(p, "fixed["):
		if isBytes {
			return hex.EncodeToString(b), nil
		}
	case decimalType.MatchString(p):
		scale, _ := strconv.Atoi(decimalType.FindStringSubmatch(p)[2])
		switch x := v.(type) {
		case *big.Int:
			return formatDecimal(x, scale), nil
		case []byte:
			return formatDecimal(unscaledFromBytes(x), scale), nil
		}
		if isInt {
			return formatDecimal(big.NewInt(n), scale), nil
		}
	}
	return nil, fmt.Errorf("a %T constant for Iceberg type %s is not supported", v, t)
}

// rawDefault turns an initial-default in the spec's JSON single-value form
// into the raw value canonConstant takes.
func rawDefault(b json.RawMessage, t *icebergType) (any, error) {
	var v any
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("parse initial-default %s: %w", b, err)
	}
	p := t.Primitive
	switch x := v.(type) {
	case json.Number:
		if n, err := x.Int64(); err == nil {
			return n, nil
		}
		return x.Float64()
	case string:
		switch {
		case p == "date":
			d, err := time.Parse("2006-01-02", x)
			return int64(d.Unix() / 86400), err
		case p == "time":
			d, err := time.Parse("15:04:05.999999999", x)
			if err != nil {
				return nil, err
			}
			return int64(d.Hour()*3600+d.Minute()*60+d.Second())*1e6 + int64(d.Nanosecond()/1000), nil
		case strings.HasPrefix(p, "timestamp"):
			layout := "2006-01-02T15:04:05.999999999"
			if strings.HasPrefix(p, "timestamptz") {
				layout += "Z07:00"
			}
			ts, err := time.Parse(layout, x)
			if err != nil {
				return nil, err
			}
			if strings.HasSuffix(p, "_ns") {
				return ts.UnixNano(), nil
			}
			return ts.UnixMicro(), nil
		case p == "binary" || strings.HasPrefix(p, "fixed["):
			return hex.DecodeString(x)
		case decimalType.MatchString(p):
			scale, _ := strconv.Atoi(decimalType.FindStringSubmatch(p)[2])
			r, ok := new(big.Rat).SetString(x)
			if !ok {
				return nil, fmt.Errorf("bad decimal default %q", x)
			}
			r.Mul(r, new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(scale)), nil)))
			return new(big.Int).Quo(r.Num(), r.Denom()), nil
		}
	}
	return v, nil
}

func floatBits(v float64, single bool) string {
	if math.IsNaN(v) {
		return "NaN"
	}
	if single {
		return fmt.Sprintf("%08x", math.Float32bits(float32(v)))
	}
	return fmt.Sprintf("%016x", math.Float64bits(v))
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// unscaledFromBytes reads a big-endian two's-complement integer.
func unscaledFromBytes(b []byte) *big.Int {
	v := new(big.Int).SetBytes(b)
	if len(b) > 0 && b[0]&0x80 != 0 {
		v.Sub(v, new(big.Int).Lsh(big.NewInt(1), uint(8*len(b))))
	}
	return v
}

// formatDecimal writes unscaled / 10^scale with exactly scale fraction digits.
func formatDecimal(unscaled *big.Int, scale int) string {
	if scale == 0 {
		return unscaled.String()
	}
	digits := new(big.Int).Abs(unscaled).String()
	if len(digits) < scale+1 {
		digits = strings.Repeat("0", scale+1-len(digits)) + digits
	}
	s := digits[:len(digits)-scale] + "." + digits[len(digits)-scale:]
	if unscaled.Sign() < 0 {
		s = "-" + s
	}
	return s
}

func formatUUID(b []byte) string {
	h := hex.EncodeToString(b)
	if len(h) != 32 {
		return h
	}
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

func validUTF8(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	// Each invalid byte becomes U+FFFD, as a UTF-8 decoder does.
	var sb strings.Builder
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		sb.WriteRune(r)
		b = b[n:]
	}
	return sb.String()
}

// appendJSON writes v as JavaScript's JSON.stringify does: no spaces,
// only '"', '\\' and control characters escaped.
func appendJSON(dst []byte, v any) []byte {
	switch x := v.(type) {
	case nil:
		return append(dst, "null"...)
	case bool:
		return strconv.AppendBool(dst, x)
	case int:
		return strconv.AppendInt(dst, int64(x), 10)
	case string:
		dst = append(dst, '"')
		for _, r := range x {
			switch {
			case r == '"':
				dst = append(dst, `\"`...)
			case r == '\\':
				dst = append(dst, `\\`...)
			case r == '\b':
				dst = append(dst, `\b`...)
			case r == '\f':
				dst = append(dst, `\f`...)
			case r == '\n':
				dst = append(dst, `\n`...)
			case r == '\r':
				dst = append(dst, `\r`...)
			case r == '\t':
				dst = append(dst, `\t`...)
			case r < 0x20:
				dst = fmt.Appendf(dst, `\u%04x`, r)
			default:
				dst = utf8.AppendRune(dst, r)
			}
		}
		return append(dst, '"')
	case []any:
		dst = append(dst, '[')
		for i, e := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendJSON(dst, e)
		}
		return append(dst, ']')
	}
	panic(fmt.Sprintf("verify: no canonical JSON for %T", v))
}
