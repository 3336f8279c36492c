package segments

// subscription delivers status changes to one subscriber without ever blocking the poller:
// it holds at most one undelivered status, and a newer one replaces it. A slow subscriber
// loses intermediate changes but always ends up with the latest.
type subscription struct {
	ch chan StoreStatus
}

func (sub *subscription) offer(st StoreStatus) {
	for {
		select {
		case sub.ch <- st:
			return
		default:
		}
		select {
		case <-sub.ch: // drop the undelivered, superseded status
		default:
		}
	}
}

// Subscribe returns a channel that receives each change of the store's Available or Stale,
// and a function that ends the subscription. The channel holds one status: a subscriber that
// does not keep up sees only the latest change. Call cancel when done; it never closes the
// channel, so a receiver must also watch its own context.
func (s *Service) Subscribe() (<-chan StoreStatus, func()) {
	sub := &subscription{ch: make(chan StoreStatus, 1)}
	s.subsMu.Lock()
	s.subs[sub] = struct{}{}
	s.subsMu.Unlock()
	return sub.ch, func() {
		s.subsMu.Lock()
		delete(s.subs, sub)
		s.subsMu.Unlock()
	}
}

// publish offers st to every subscriber.
func (s *Service) publish(st StoreStatus) {
	s.subsMu.Lock()
	defer s.subsMu.Unlock()
	for sub := range s.subs {
		sub.offer(st)
	}
}
