// The same for the CommonJS types.
import ld = require('@launchdarkly/node-server-sdk');
import bigseg = require('@bigseg/node-server-sdk-bigseg');

const options: ld.LDOptions = { bigSegments: { store: bigseg.BigsegBigSegmentStore({ baseUrl: 'http://bigseg:8080', environment: 'staging' }) } };
export const client = ld.init('sdk-key', options);
export const status: number | undefined = new bigseg.BigsegError('x').status;
