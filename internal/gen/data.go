package gen

import (
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
)

// Column names of the generated table.
const (
	ColEventID    = "event_id"
	ColEventTime  = "event_time"
	ColUserID     = "user_id"
	ColSessionID  = "session_id"
	ColEventType  = "event_type"
	ColURL        = "url"
	ColCountry    = "country"
	ColDevice     = "device"
	ColAmount     = "amount"
	ColProperties = "properties"
	ColIngestDate = "ingest_date"

	// PartitionFieldName is the name of the day(event_time) partition field.
	PartitionFieldName = "event_time_day"
)

// Schema returns the Iceberg schema of the generated event table:
//
//	 1 event_id    long           required  unique: append index << 32 | row index
//	 2 event_time  timestamptz    required  microseconds, within the append's day
//	 3 user_id     long           required  Zipf-distributed over 1..1,000,000
//	 4 session_id  string         required  16 hex chars, ~15 events per session
//	 5 event_type  string         required  page_view, click, search, add_to_cart, ...
//	 6 url         string         optional
//	 7 country     string         optional  ISO 3166 alpha-2
//	 8 device      string         optional  desktop, mobile, tablet, ...
//	 9 amount      decimal(10,2)  optional  set for add_to_cart/purchase only
//	10 properties  map<string,string> optional (browser, os, utm_source, ...)
//	11 ingest_date date           required
func Schema() *iceberg.Schema {
	return iceberg.NewSchema(0,
		iceberg.NestedField{ID: 1, Name: ColEventID, Type: iceberg.PrimitiveTypes.Int64, Required: true},
		iceberg.NestedField{ID: 2, Name: ColEventTime, Type: iceberg.PrimitiveTypes.TimestampTz, Required: true},
		iceberg.NestedField{ID: 3, Name: ColUserID, Type: iceberg.PrimitiveTypes.Int64, Required: true},
		iceberg.NestedField{ID: 4, Name: ColSessionID, Type: iceberg.PrimitiveTypes.String, Required: true},
		iceberg.NestedField{ID: 5, Name: ColEventType, Type: iceberg.PrimitiveTypes.String, Required: true},
		iceberg.NestedField{ID: 6, Name: ColURL, Type: iceberg.PrimitiveTypes.String},
		iceberg.NestedField{ID: 7, Name: ColCountry, Type: iceberg.PrimitiveTypes.String},
		iceberg.NestedField{ID: 8, Name: ColDevice, Type: iceberg.PrimitiveTypes.String},
		iceberg.NestedField{ID: 9, Name: ColAmount, Type: iceberg.DecimalTypeOf(10, 2)},
		iceberg.NestedField{ID: 10, Name: ColProperties, Type: &iceberg.MapType{
			KeyID: 12, KeyType: iceberg.PrimitiveTypes.String,
			ValueID: 13, ValueType: iceberg.PrimitiveTypes.String, ValueRequired: false,
		}},
		iceberg.NestedField{ID: 11, Name: ColIngestDate, Type: iceberg.PrimitiveTypes.Date, Required: true},
	)
}

// EventID returns the event_id of row row of append appendIdx.
func EventID(appendIdx, row int) int64 { return int64(appendIdx)<<32 | int64(uint32(row)) }

// appendDay returns the first microsecond (UTC) of the day that append
// appendIdx writes to: appends go round-robin over the partitions' days.
func appendDay(opt *Options, appendIdx int) time.Time {
	days := max(opt.Partitions, 1)
	start := opt.Start.UTC().Truncate(24 * time.Hour)

	return start.AddDate(0, 0, appendIdx%days)
}

var (
	eventTypes       = []string{"page_view", "click", "search", "add_to_cart", "purchase", "login", "logout", "signup"}
	eventTypeWeights = []float64{0.55, 0.18, 0.09, 0.07, 0.025, 0.04, 0.03, 0.015}

	countries      = []string{"US", "DE", "GB", "FR", "IN", "BR", "JP", "CA", "ES", "IT", "NL", "PL", "SE", "MX", "AU", "KR", "TR", "CH", "BE", "AT", "DK", "NO", "IE", "PT", "ZA"}
	countryWeights = zipfWeights(len(countries), 1.1)

	devices       = []string{"desktop", "mobile", "tablet", "smart_tv", "bot"}
	deviceWeights = []float64{0.42, 0.48, 0.07, 0.01, 0.02}

	browsers   = []string{"chrome", "safari", "firefox", "edge", "samsung", "opera"}
	browserW   = []float64{0.62, 0.2, 0.07, 0.06, 0.03, 0.02}
	osByDevice = map[string][]string{
		"desktop":  {"windows", "macos", "linux", "chromeos"},
		"mobile":   {"android", "ios"},
		"tablet":   {"ipados", "android"},
		"smart_tv": {"tizen", "webos", "android_tv"},
		"bot":      {"unknown"},
	}
	utmSources  = []string{"google", "newsletter", "facebook", "instagram", "bing", "partner", "tiktok", "affiliate"}
	experiments = []string{"checkout_v2", "new_nav", "price_anchor", "reco_model_7", "dark_mode"}
	categories  = []string{"shoes", "women", "men", "kids", "home", "garden", "electronics", "books", "toys", "sports", "beauty", "outlet", "new-arrivals", "accessories"}
	searchWords = []string{"red", "blue", "black", "white", "running", "shoes", "dress", "jacket", "lamp", "sofa", "phone", "case", "charger", "kids", "summer", "winter", "sale", "gift", "leather", "cotton", "wireless", "headphones", "table", "chair", "bag", "watch", "organic", "vintage", "mini", "xl"}
	pages       = []string{"/", "/cart", "/account", "/help/shipping", "/help/returns", "/wishlist", "/stores", "/about"}
)

func zipfWeights(n int, s float64) []float64 {
	w := make([]float64, n)
	for i := range w {
		w[i] = 1 / math.Pow(float64(i+1), s)
	}

	return w
}

// picker draws indexes from a discrete distribution.
type picker []float64 // cumulative, normalized

func newPicker(w []float64) picker {
	var sum float64
	for _, x := range w {
		sum += x
	}
	p := make(picker, len(w))
	var acc float64
	for i, x := range w {
		acc += x / sum
		p[i] = acc
	}
	p[len(p)-1] = 1

	return p
}

func (p picker) pick(r *rand.Rand) int {
	x := r.Float64()
	i, _ := slices.BinarySearch(p, x)

	return min(i, len(p)-1)
}

var (
	pickEventType = newPicker(eventTypeWeights)
	pickCountry   = newPicker(countryWeights)
	pickDevice    = newPicker(deviceWeights)
	pickBrowser   = newPicker(browserW)
)

// EventTypes lists the possible event_type values.
func EventTypes() []string { return slices.Clone(eventTypes) }

type session struct {
	id       string
	user     int64
	country  string
	device   string
	browser  string
	os       string
	utm      string // "" = none
	exp      string // "" = none
	variant  string
	loggedIn bool
}

// rngFor returns the deterministic random source of one append.
func rngFor(seed int64, appendIdx int) *rand.Rand {
	return rand.New(rand.NewPCG(uint64(seed), uint64(appendIdx)*0x9E3779B97F4A7C15+0x632BE59BD9B4E019))
}

// buildBatch generates the rows of append appendIdx. The result depends only
// on (opt.Seed, opt.Start, opt.Partitions, rows, appendIdx).
func buildBatch(mem memory.Allocator, sc *arrow.Schema, opt *Options, appendIdx, rows int) arrow.RecordBatch {
	r := rngFor(opt.Seed, appendIdx)
	day := appendDay(opt, appendIdx)
	dayMicros := day.UnixMicro()
	const microsPerDay = 24 * 3600 * 1_000_000
	dayNum := int32(day.Unix() / 86400)

	// Sessions: ~15 events each; users are Zipf-distributed (a few heavy users).
	nSess := max(1, rows/15)
	users := rand.NewZipf(r, 1.2, 8, 999_999)
	sessions := make([]session, nSess)
	for i := range sessions {
		s := &sessions[i]
		s.id = strconv.FormatUint(r.Uint64()|1<<63, 16)[:16]
		s.user = int64(users.Uint64()) + 1
		s.country = countries[pickCountry.pick(r)]
		s.device = devices[pickDevice.pick(r)]
		s.browser = browsers[pickBrowser.pick(r)]
		oss := osByDevice[s.device]
		s.os = oss[r.IntN(len(oss))]
		if r.IntN(3) == 0 {
			s.utm = utmSources[r.IntN(len(utmSources))]
		}
		if r.IntN(4) == 0 {
			s.exp = experiments[r.IntN(len(experiments))]
			s.variant = string(rune('A' + r.IntN(2)))
		}
		s.loggedIn = r.IntN(2) == 0
	}

	// Event times: uniformly spread over the day, sorted (as a streaming
	// micro-batch would be), with microsecond precision.
	times := make([]int64, rows)
	for i := range times {
		times[i] = r.Int64N(microsPerDay)
	}
	slices.Sort(times)

	b := array.NewRecordBuilder(mem, sc)
	defer b.Release()
	b.Reserve(rows)

	idB := b.Field(0).(*array.Int64Builder)
	tsB := b.Field(1).(*array.TimestampBuilder)
	userB := b.Field(2).(*array.Int64Builder)
	sessB := b.Field(3).(*array.StringBuilder)
	typeB := b.Field(4).(*array.StringBuilder)
	urlB := b.Field(5).(*array.StringBuilder)
	countryB := b.Field(6).(*array.StringBuilder)
	deviceB := b.Field(7).(*array.StringBuilder)
	amountB := b.Field(8).(*array.Decimal128Builder)
	propsB := b.Field(9).(*array.MapBuilder)
	keyB := propsB.KeyBuilder().(*array.StringBuilder)
	valB := propsB.ItemBuilder().(*array.StringBuilder)
	ingestB := b.Field(10).(*array.Date32Builder)

	products := rand.NewZipf(r, 1.05, 4, 49_999)
	var url []byte
	for i := range rows {
		s := &sessions[r.IntN(nSess)]
		et := eventTypes[pickEventType.pick(r)]

		idB.Append(EventID(appendIdx, i))
		tsB.Append(arrow.Timestamp(dayMicros + times[i]))
		userB.Append(s.user)
		sessB.Append(s.id)
		typeB.Append(et)

		url = append(url[:0], "https://shop.example.com"...)
		switch et {
		case "page_view", "click", "add_to_cart":
			if et == "page_view" && r.IntN(4) == 0 {
				url = append(url, "/c/"...)
				url = append(url, categories[r.IntN(len(categories))]...)
				if r.IntN(3) == 0 {
					url = append(url, "?page="...)
					url = strconv.AppendInt(url, int64(2+r.IntN(9)), 10)
				}
			} else if et == "page_view" && r.IntN(6) == 0 {
				url = append(url, pages[r.IntN(len(pages))]...)
			} else {
				url = append(url, "/p/"...)
				url = strconv.AppendUint(url, 100000+products.Uint64(), 10)
				if et == "click" {
					url = append(url, "?ref=reco&pos="...)
					url = strconv.AppendInt(url, int64(1+r.IntN(24)), 10)
				}
			}
		case "search":
			url = append(url, "/search?q="...)
			for w := range 1 + r.IntN(3) {
				if w > 0 {
					url = append(url, '+')
				}
				url = append(url, searchWords[r.IntN(len(searchWords))]...)
			}
		case "purchase":
			url = append(url, "/checkout/confirmation?order=O"...)
			url = strconv.AppendUint(url, r.Uint64N(1e10), 10)
		case "login", "signup":
			url = append(url, "/account/"...)
			url = append(url, et...)
		default:
			url = append(url, "/account/logout"...)
		}
		if r.IntN(50) == 0 {
			urlB.AppendNull()
		} else {
			urlB.BinaryBuilder.Append(url)
		}

		if r.IntN(100) == 0 {
			countryB.AppendNull()
		} else {
			countryB.Append(s.country)
		}
		deviceB.Append(s.device)

		switch et {
		case "purchase":
			amountB.Append(decimal128.FromI64(int64(500 + r.IntN(20)*1000 + r.IntN(100)*99)))
		case "add_to_cart":
			// most items end in .99 or .00
			cents := int64(199 + r.IntN(300)*100)
			if r.IntN(3) == 0 {
				cents++
			}
			amountB.Append(decimal128.FromI64(cents))
		default:
			amountB.AppendNull()
		}

		if s.device == "bot" && r.IntN(2) == 0 {
			propsB.AppendNull()
		} else {
			propsB.Append(true)
			keyB.Append("browser")
			valB.Append(s.browser)
			keyB.Append("os")
			valB.Append(s.os)
			if s.utm != "" {
				keyB.Append("utm_source")
				valB.Append(s.utm)
			}
			if s.exp != "" {
				keyB.Append("experiment")
				valB.Append(s.exp + ":" + s.variant)
			}
			if s.loggedIn {
				keyB.Append("logged_in")
				valB.Append("true")
			}
			if et == "search" {
				keyB.Append("results")
				valB.Append(strconv.Itoa(r.IntN(400)))
			}
		}

		// Events of the last half hour of a day are sometimes ingested
		// the next day.
		ingest := dayNum
		if times[i] > microsPerDay-1800*1_000_000 && r.IntN(3) == 0 {
			ingest++
		}
		ingestB.Append(arrow.Date32(ingest))
	}

	return b.NewRecordBatch()
}
