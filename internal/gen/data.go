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
	payments    = []string{"card", "card", "card", "paypal", "apple_pay", "google_pay", "klarna"}
	referrers   = []string{"https://www.google.com/search?q=", "https://www.bing.com/search?q=", "https://duckduckgo.com/?q=", "https://www.facebook.com/", "https://l.instagram.com/", "https://t.co/", "https://news.ycombinator.com/", "https://www.reddit.com/r/deals/", "android-app://com.google.android.gm/"}
	locales     = []string{"en-US", "de-DE", "en-GB", "fr-FR", "en-IN", "pt-BR", "ja-JP", "en-CA", "es-ES", "it-IT", "nl-NL", "pl-PL", "sv-SE", "es-MX", "en-AU", "ko-KR", "tr-TR", "de-CH"}
	screens     = map[string][]string{
		"desktop":  {"1920x1080", "2560x1440", "1366x768", "1536x864", "1440x900", "3840x2160"},
		"mobile":   {"390x844", "393x873", "412x915", "360x800", "430x932", "375x667"},
		"tablet":   {"820x1180", "768x1024", "1024x1366", "800x1280"},
		"smart_tv": {"1920x1080", "3840x2160"},
		"bot":      {"1024x768"},
	}
	pages = []string{"/", "/cart", "/account", "/help/shipping", "/help/returns", "/wishlist", "/stores", "/about"}
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
	ua       string
	ip       string
	screen   string
	locale   string
	landed   bool   // first event (landing page) already emitted
	pageView []byte // current page view id
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
		s.ua = userAgent(r, s.device, s.browser, s.os)
		s.ip = ipAddr(r)
		s.screen = screens[s.device][r.IntN(len(screens[s.device]))]
		s.locale = locales[min(pickCountry.pick(r), len(locales)-1)]
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
	var url, tmp []byte
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
		// The landing page of a campaign session carries tracking parameters.
		landing := !s.landed
		s.landed = true
		if landing && s.utm != "" {
			if slices.Contains(url, '?') {
				url = append(url, '&')
			} else {
				url = append(url, '?')
			}
			url = append(url, "utm_source="...)
			url = append(url, s.utm...)
			url = append(url, "&utm_medium=cpc&utm_campaign=spring_sale_"...)
			url = strconv.AppendInt(url, int64(r.IntN(40)), 10)
			switch s.utm {
			case "google":
				url = append(url, "&gclid="...)
				url = appendToken(url, r, 48)
			case "facebook", "instagram":
				url = append(url, "&fbclid="...)
				url = appendToken(url, r, 56)
			}
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
			kv := func(k string, v []byte) {
				keyB.Append(k)
				valB.BinaryBuilder.Append(v)
			}
			kvs := func(k, v string) {
				keyB.Append(k)
				valB.Append(v)
			}
			// request id: UUID v4 per event
			tmp = appendUUID(tmp[:0], r)
			kv("request_id", tmp)
			// client clock: event time minus a small skew, ISO-8601 ms
			tmp = time.UnixMicro(dayMicros+times[i]-r.Int64N(3_000_000)).UTC().AppendFormat(tmp[:0], "2006-01-02T15:04:05.000Z")
			kv("client_ts", tmp)
			// W3C trace context of the collector request
			tmp = append(tmp[:0], "00-"...)
			tmp = appendHex(tmp, r.Uint64(), r.Uint64(), r.Uint64())
			tmp = append(tmp, "-01"...)
			kv("traceparent", tmp)
			if et == "page_view" || s.pageView == nil {
				s.pageView = appendUUID(s.pageView[:0], r)
			}
			kv("page_view_id", s.pageView)
			kvs("browser", s.browser)
			kvs("os", s.os)
			kvs("user_agent", s.ua)
			kvs("ip", s.ip)
			kvs("screen", s.screen)
			kvs("locale", s.locale)
			if et == "page_view" {
				// log-normal load time around 800ms
				tmp = strconv.AppendInt(tmp[:0], int64(math.Exp(6.7+0.6*r.NormFloat64())), 10)
				kv("page_load_ms", tmp)
			}
			if landing {
				tmp = append(tmp[:0], referrers[r.IntN(len(referrers))]...)
				if tmp[len(tmp)-1] == '=' {
					tmp = append(tmp, searchWords[r.IntN(len(searchWords))]...)
				}
				kv("referrer", tmp)
			}
			if s.utm != "" {
				kvs("utm_source", s.utm)
			}
			if s.exp != "" {
				kvs("experiment", s.exp+":"+s.variant)
			}
			if s.loggedIn {
				kvs("logged_in", "true")
			}
			if et == "search" {
				tmp = strconv.AppendInt(tmp[:0], int64(r.IntN(400)), 10)
				kv("results", tmp)
			}
			if et == "purchase" {
				tmp = strconv.AppendInt(tmp[:0], int64(1+r.IntN(5)), 10)
				kv("items", tmp)
				kvs("payment", payments[r.IntN(len(payments))])
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

const hexDigits = "0123456789abcdef"

// appendUUID appends a random (version 4) UUID.
func appendUUID(b []byte, r *rand.Rand) []byte {
	hi, lo := r.Uint64(), r.Uint64()
	hi = hi&^0xf000 | 0x4000     // version 4
	lo = lo&^(0xc<<60) | 0x8<<60 // variant 10
	var u [16]byte
	for i := range 8 {
		u[i] = byte(hi >> (56 - 8*i))
		u[8+i] = byte(lo >> (56 - 8*i))
	}
	for i, c := range u {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			b = append(b, '-')
		}
		b = append(b, hexDigits[c>>4], hexDigits[c&0xf])
	}

	return b
}

const tokenChars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

// appendToken appends n random URL-safe characters (click ids and the like).
func appendToken(b []byte, r *rand.Rand, n int) []byte {
	for range n {
		b = append(b, tokenChars[r.IntN(len(tokenChars))])
	}

	return b
}

// userAgent builds a plausible User-Agent string for a session.
func userAgent(r *rand.Rand, device, browser, os string) string {
	if device == "bot" {
		bots := []string{
			"Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
			"Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)",
			"Mozilla/5.0 (compatible; AhrefsBot/7.0; +http://ahrefs.com/robot/)",
		}

		return bots[r.IntN(len(bots))]
	}
	var platform string
	switch os {
	case "windows":
		platform = "Windows NT 10.0; Win64; x64"
	case "macos":
		platform = "Macintosh; Intel Mac OS X 10_15_" + strconv.Itoa(r.IntN(8))
	case "linux":
		platform = "X11; Linux x86_64"
	case "chromeos":
		platform = "X11; CrOS x86_64 15633.69.0"
	case "ios":
		platform = "iPhone; CPU iPhone OS 17_" + strconv.Itoa(r.IntN(6)) + " like Mac OS X"
	case "ipados":
		platform = "iPad; CPU OS 17_" + strconv.Itoa(r.IntN(6)) + " like Mac OS X"
	default:
		platform = "Linux; Android " + strconv.Itoa(10+r.IntN(5)) + "; SM-" + string(rune('A'+r.IntN(3))) + strconv.Itoa(100+r.IntN(900))
	}
	major := 118 + r.IntN(8)
	build := strconv.Itoa(major) + ".0." + strconv.Itoa(5000+r.IntN(1200)) + "." + strconv.Itoa(r.IntN(200))
	switch browser {
	case "safari":
		return "Mozilla/5.0 (" + platform + ") AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17." + strconv.Itoa(r.IntN(5)) + " Safari/605.1.15"
	case "firefox":
		return "Mozilla/5.0 (" + platform + "; rv:" + strconv.Itoa(major) + ".0) Gecko/20100101 Firefox/" + strconv.Itoa(major) + ".0"
	case "edge":
		return "Mozilla/5.0 (" + platform + ") AppleWebKit/537.36 (KHTML, like Gecko) Chrome/" + build + " Safari/537.36 Edg/" + build
	case "samsung":
		return "Mozilla/5.0 (" + platform + ") AppleWebKit/537.36 (KHTML, like Gecko) SamsungBrowser/23.0 Chrome/" + build + " Mobile Safari/537.36"
	case "opera":
		return "Mozilla/5.0 (" + platform + ") AppleWebKit/537.36 (KHTML, like Gecko) Chrome/" + build + " Safari/537.36 OPR/105.0.0.0"
	default:
		return "Mozilla/5.0 (" + platform + ") AppleWebKit/537.36 (KHTML, like Gecko) Chrome/" + build + " Safari/537.36"
	}
}

// ipAddr returns a random public-looking IPv4 address.
func ipAddr(r *rand.Rand) string {
	b := strconv.AppendInt(nil, int64(1+r.IntN(223)), 10)
	for range 3 {
		b = append(b, '.')
		b = strconv.AppendInt(b, int64(r.IntN(256)), 10)
	}

	return string(b)
}

// appendHex appends the 16-digit hex forms of vs.
func appendHex(b []byte, vs ...uint64) []byte {
	for _, v := range vs {
		for shift := 60; shift >= 0; shift -= 4 {
			b = append(b, hexDigits[(v>>uint(shift))&0xf])
		}
	}

	return b
}
