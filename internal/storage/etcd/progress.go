package etcd

import "context"

// RequestProgress asks etcd to send a progress notification on every watch
// of this client as soon as it is caught up. The API server's watch cache
// uses it to learn that it has seen every change up to a revision without
// waiting for the periodic notification.
func (s *Store) RequestProgress(ctx context.Context) error {
	if err := s.client.RequestProgress(ctx); err != nil {
		return annotate("request watch progress", err)
	}
	return nil
}
