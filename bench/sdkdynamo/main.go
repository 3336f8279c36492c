// Command sdkdynamo compares LaunchDarkly's Go SDK reading Big Segments from DynamoDB with its
// own DynamoDB store (go-server-sdk-dynamodb) against the same SDK reading them through bigseg
// (its Redis store, go-server-sdk-redis-redigo, on bigseg's Redis-protocol listener, bigseg
// on the table). The tests check that both answer the same; the program measures what each
// costs the table. A module of its own, so that LaunchDarkly's SDK stays out of bigseg's go.mod.
package main

func main() {}
