// Package ldbigseg lets the LaunchDarkly Go server SDK (go-server-sdk v7) use bigseg as its Big
// Segment store, over HTTP, in place of a Redis connection in every SDK instance:
//
//	config.BigSegments = ldcomponents.BigSegments(
//		ldbigseg.BigSegmentStore().BaseURL("http://bigseg:8080").BearerToken(token),
//	)
//
// It is the counterpart of LaunchDarkly's own ldredis.BigSegmentStore(): the SDK keeps its
// membership cache and its status poller in front of it, and calls the store only on a cache
// miss (one GET /memberships?contextHash=..., one HTTP round trip) and at each status poll (one
// GET /status, which bigseg answers from its own last poll, without reading Redis).
//
// A bigseg may serve several LaunchDarkly environments (BIGSEG_ENVIRONMENTS), as one Relay Proxy
// does: each SDK client then reads its own, with [StoreBuilder.Environment], through
// /environments/{name}/memberships and /environments/{name}/status.
//
// Every answer that is not a usable one is an error for the SDK, which then reports the store
// as unavailable and gives evaluations the reason BigSegmentsStatus STORE_ERROR, exactly as it
// would reading Redis directly: see [ErrStoreUnavailable] and [HTTPError].
//
// The SDK caches the answers (1,000 contexts by default), so the store bounds what one answer
// may hold ([StoreBuilder.MaxRefs], [StoreBuilder.MaxRefBytes]), and with it what a broken or
// hostile bigseg can make the SDK's process keep. It checks the bounds as it reads an answer,
// stopping at the first segment ref over them; such an answer is an error
// ([ErrAnswerTooLarge]) and nothing of it is kept.
package ldbigseg
