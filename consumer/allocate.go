package consumer

import (
	"crypto/md5"
	"encoding/binary"
	"slices"
	"sort"
	"strconv"
)

// consistentHashVirtualNodes is RocketMQ's default number of ring
// positions per member.
const consistentHashVirtualNodes = 10

// Allocate divides the queues 0..queues-1 of topic among members and
// returns each member's queue ids in ascending order (members with none
// map to an empty slice). Members are sorted and de-duplicated first, so
// every caller computes the same answer whatever order it lists them in.
// An unknown strategy allocates Averagely.
func (s AllocateStrategy) Allocate(topic string, queues int, members []string) map[string][]int {
	ids := slices.Clone(members)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	out := make(map[string][]int, len(ids))
	for _, id := range ids {
		out[id] = []int{}
	}
	if queues <= 0 || len(ids) == 0 {
		return out
	}
	switch s {
	case AveragelyByCircle:
		for q := range queues {
			id := ids[q%len(ids)]
			out[id] = append(out[id], q)
		}
	case ConsistentHash:
		r := newHashRing(ids, consistentHashVirtualNodes)
		for q := range queues {
			id := r.route(queueHashKey(topic, q))
			out[id] = append(out[id], q)
		}
	default:
		for i, id := range ids {
			out[id] = averageBlock(queues, len(ids), i)
		}
	}
	return out
}

// averageBlock is the contiguous block of member i of c among n queues:
// with r = n mod c, members below r get ceil(n/c) queues starting at
// i*ceil(n/c), the others floor(n/c) starting at i*floor(n/c)+r; when
// n <= c the first n members get one queue each.
func averageBlock(n, c, i int) []int {
	mod := n % c
	size := n / c
	if n <= c {
		size = 1
	} else if mod > 0 && i < mod {
		size++
	}
	start := i*size + mod
	if mod > 0 && i < mod {
		start = i * size
	}
	if n <= c {
		start = i
	}
	cnt := min(size, n-start)
	out := make([]int, 0, max(cnt, 0))
	for k := range cnt {
		out = append(out, start+k)
	}
	return out
}

// queueHashKey is the string a queue is hashed by on the ring. RocketMQ
// hashes MessageQueue.toString (topic, broker name and queue id); mqlite
// has no broker, so the key is topic and queue id.
func queueHashKey(topic string, q int) string {
	return "MessageQueue [topic=" + topic + ", queueId=" + strconv.Itoa(q) + "]"
}

// hashRing is a consistent-hash ring: each member at vnodes positions
// named "id-k", hashed to the first four bytes of their MD5 (big-endian,
// unsigned), as RocketMQ's ConsistentHashRouter does.
type hashRing struct {
	pos []uint32
	ids []string // ids[i] owns pos[i]
}

func ringHash(s string) uint32 {
	sum := md5.Sum([]byte(s))
	return binary.BigEndian.Uint32(sum[:4])
}

func newHashRing(ids []string, vnodes int) *hashRing {
	type node struct {
		h  uint32
		id string
	}
	nodes := make([]node, 0, len(ids)*vnodes)
	for _, id := range ids {
		for k := range vnodes {
			nodes = append(nodes, node{ringHash(id + "-" + strconv.Itoa(k)), id})
		}
	}
	// On equal hashes the later insertion wins, as in a TreeMap put; ids
	// are sorted, so the outcome is the same for every caller.
	sort.SliceStable(nodes, func(i, j int) bool { return nodes[i].h < nodes[j].h })
	r := &hashRing{}
	for i, n := range nodes {
		if i+1 < len(nodes) && nodes[i+1].h == n.h {
			continue
		}
		r.pos = append(r.pos, n.h)
		r.ids = append(r.ids, n.id)
	}
	return r
}

// route returns the owner of the first position at or after key's hash,
// wrapping to the first position.
func (r *hashRing) route(key string) string {
	h := ringHash(key)
	i := sort.Search(len(r.pos), func(i int) bool { return r.pos[i] >= h })
	if i == len(r.pos) {
		i = 0
	}
	return r.ids[i]
}
