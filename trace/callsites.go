package trace

// siteCounter keeps, by call site, the bytes and allocations live now and at
// the trace's peak of live bytes. A call site is an alloc's stack when it
// has one, else its tag.
//
// The peak's figures are not copied at every new peak (a ramp of a million
// allocations would copy the table a million times): the sites changed
// since the last peak are noted, and only they are copied when a new peak
// comes. Each change is copied at most once, so the cost is linear in the
// trace, and memory is linear in the number of sites.
type siteCounter struct {
	keys  []SiteBytes       // by key: its stack or tag; Bytes and Count at the peak
	now   []siteNow         // by key: live now
	byTag map[string]uint32 // key + 1 of each tag
	stack []uint32          // key + 1 of each stack id
	dirty []uint32          // keys changed since the last peak
	// lastTag and lastKey are the last tag looked up: allocations come in
	// runs of one tag (and a trace without tags has only "").
	lastTag string
	lastKey uint32
}

type siteNow struct {
	bytes uint64
	count int64
	dirty bool
}

// SiteBytes is what one call site held at the trace's peak: the allocations
// of one stack, or of one tag when they have no stack.
type SiteBytes struct {
	Stack uint32
	Tag   string
	Bytes uint64
	Count int64
}

// maxSiteTags bounds the tags counted apart; past it, the allocations of
// new tags are counted under OtherTags. A trace tags allocations with call
// sites or op names, thousands of them; the bound keeps a trace whose every
// tag differs from growing the table with it.
const maxSiteTags = 1 << 16

// OtherTags is the tag the allocations of tags past maxSiteTags are counted
// under.
const OtherTags = "(other tags)"

func newSiteCounter() *siteCounter {
	c := &siteCounter{byTag: map[string]uint32{}}
	c.key(&Event{}) // key 0: no stack, no tag
	return c
}

// key returns the key of ev's call site.
func (c *siteCounter) key(ev *Event) uint32 {
	if s := ev.Stack; s != 0 {
		for int(s) >= len(c.stack) {
			c.stack = append(c.stack, 0)
		}
		if k := c.stack[s]; k != 0 {
			return k - 1
		}
		k := c.newKey(SiteBytes{Stack: s, Tag: ev.Tag})
		c.stack[s] = k + 1
		return k
	}
	tag := ev.Tag
	if tag == c.lastTag && len(c.keys) > 0 {
		return c.lastKey
	}
	if k, ok := c.byTag[tag]; ok {
		c.lastTag, c.lastKey = tag, k-1
		return k - 1
	}
	if len(c.byTag) >= maxSiteTags {
		tag = OtherTags
		if k, ok := c.byTag[tag]; ok {
			return k - 1
		}
	}
	k := c.newKey(SiteBytes{Tag: tag})
	c.byTag[tag] = k + 1
	return k
}

func (c *siteCounter) newKey(s SiteBytes) uint32 {
	c.keys = append(c.keys, s)
	c.now = append(c.now, siteNow{})
	return uint32(len(c.keys) - 1)
}

// alloc counts ev, live now, and returns its key; peak says that it makes a
// new peak of live bytes.
func (c *siteCounter) alloc(ev *Event, peak bool) uint32 {
	k := c.key(ev)
	n := &c.now[k]
	n.bytes += ev.Size
	n.count++
	c.touch(k)
	if peak {
		for _, d := range c.dirty {
			n := &c.now[d]
			c.keys[d].Bytes, c.keys[d].Count = n.bytes, n.count
			n.dirty = false
		}
		c.dirty = c.dirty[:0]
	}
	return k
}

// free counts the freeing of size bytes of key k.
func (c *siteCounter) free(k uint32, size uint64) {
	n := &c.now[k]
	n.bytes -= size
	n.count--
	c.touch(k)
}

func (c *siteCounter) touch(k uint32) {
	if n := &c.now[k]; !n.dirty {
		n.dirty = true
		c.dirty = append(c.dirty, k)
	}
}

// PeakCallSites returns, with TrackCallSites, what each call site held at
// the trace's first peak of live bytes, for the sites that held an
// allocation then, in the order they first appeared; their Bytes add up
// to Summary.PeakLiveBytes. Without TrackCallSites it returns nil.
func (r *Reader) PeakCallSites() []SiteBytes {
	if r.sites == nil {
		return nil
	}
	var out []SiteBytes
	for _, s := range r.sites.keys {
		if s.Count > 0 {
			out = append(out, s)
		}
	}
	return out
}
