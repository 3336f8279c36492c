// Type-checks (tsc -p test/types) that the ES module types fit the SDK's bigSegments.store
// option and say what the store's calls return.
import { init, type LDOptions, type interfaces } from '@launchdarkly/node-server-sdk';
import { BigsegBigSegmentStore, BigsegError, type BigsegErrorKind } from '@bigseg/node-server-sdk-bigseg';

const options: LDOptions = {
  bigSegments: {
    store: BigsegBigSegmentStore({
      baseUrl: 'http://bigseg:8080',
      environment: 'production',
      bearerToken: 'tok',
      timeoutMs: 2000,
      maxRefs: 500,
      maxRefBytes: 32768,
    }),
  },
};
export const client = init('sdk-key', options);

export async function use(store: interfaces.BigSegmentStore): Promise<boolean | undefined> {
  const meta: interfaces.BigSegmentStoreMetadata | undefined = await store.getMetadata();
  const m = await store.getUserMembership('aGFzaA==');
  return meta?.lastUpToDate !== undefined ? m?.['beta.g3'] : undefined;
}

export function kindOf(err: unknown): BigsegErrorKind | undefined {
  return err instanceof BigsegError ? err.kind : undefined;
}
