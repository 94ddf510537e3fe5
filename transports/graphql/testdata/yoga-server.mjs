// A GraphQL server built on graphql-yoga (queries and mutations over HTTP)
// and graphql-ws on the ws package (subscriptions over the
// graphql-transport-ws protocol), third-party implementations, for
// TestYogaPeer. It listens on 127.0.0.1 at a free port and prints
// {"port": N, "yoga_version": V, "graphql_ws_version": W} as its first
// line of standard output.
//
// Run it with NODE_PATH pointing at testdata/peer/node_modules (npm ci
// --prefix transports/graphql/testdata/peer). ES modules ignore
// NODE_PATH, so the packages are loaded through createRequire, which
// honours it.
import { createServer } from 'node:http';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const { createYoga, createSchema } = require('graphql-yoga');
const { GraphQLError } = require('graphql');
const { WebSocketServer } = require('ws');
const { useServer } = require('graphql-ws/use/ws');
const yogaVersion = require('graphql-yoga/package.json').version;
const wsVersion = require('graphql-ws/package.json').version;

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

const books = {
  1: { id: '1', title: 'Dune', author: { name: 'Frank Herbert' } },
  2: { id: '2', title: 'Anonymous', author: { secret: true } },
};
let active = 0;

const schema = createSchema({
  typeDefs: /* GraphQL */ `
    "A book."
    type Book { id: ID! title: String! author: Author }
    type Author { name: String! }
    union SearchResult = Book | Author
    enum Genre { FICTION SCIENCE }
    input BookInput { title: String! tags: [String!] genre: Genre = FICTION }
    type Query {
      "Greets name."
      hello(name: String): String!
      "Adds two integers."
      add(a: Int!, b: Int!): Int!
      "A book by id; book 2's author cannot be read, so its answer has partial data."
      book(id: ID!): Book
      "Books and authors matching term."
      search(term: String!): [SearchResult!]!
      "Always fails."
      boom: String
      "How many countdown subscriptions are running."
      activeSubscriptions: Int!
    }
    type Mutation {
      "Echoes msg."
      echo(msg: String!): String!
      "Adds a book."
      addBook(input: BookInput!): Book!
    }
    type Subscription {
      "Counts down from from to 0, one number every delayMs."
      countdown(from: Int!, delayMs: Int = 10): Int!
    }
  `,
  resolvers: {
    Query: {
      hello: (_, { name }) => `Hello ${name ?? 'world'}`,
      add: (_, { a, b }) => a + b,
      book: (_, { id }) => books[id] ?? null,
      search: () => [books[1], books[1].author],
      boom: () => {
        throw new GraphQLError('boom: the peer refuses', { extensions: { code: 'BOOM' } });
      },
      activeSubscriptions: () => active,
    },
    Author: {
      name: (a) => {
        if (a.secret) throw new GraphQLError('the author is secret');
        return a.name;
      },
    },
    SearchResult: {
      __resolveType: (v) => (v.title ? 'Book' : 'Author'),
    },
    Mutation: {
      echo: (_, { msg }) => msg,
      addBook: (_, { input }) => ({ id: '3', title: `${input.title} (${input.genre}, ${(input.tags ?? []).join('+')})`, author: null }),
    },
    Subscription: {
      countdown: {
        subscribe: async function* countdown(_, { from, delayMs }) {
          active++;
          try {
            for (let i = from; i >= 0; i--) {
              yield { countdown: i };
              if (i > 0) await sleep(delayMs);
            }
          } finally {
            active--;
          }
        },
      },
    },
  },
});

const yoga = createYoga({ schema, graphqlEndpoint: '/graphql', graphiql: false, logging: false });
const server = createServer(yoga);
const wss = new WebSocketServer({ server, path: yoga.graphqlEndpoint });

useServer(
  {
    execute: (args) => args.rootValue.execute(args),
    subscribe: (args) => args.rootValue.subscribe(args),
    onSubscribe: async (ctx, _id, params) => {
      const { schema: s, execute, subscribe, contextFactory, parse, validate } = yoga.getEnveloped({
        ...ctx,
        req: ctx.extra.request,
        socket: ctx.extra.socket,
        params,
      });
      const args = {
        schema: s,
        operationName: params.operationName,
        document: parse(params.query),
        variableValues: params.variables,
        contextValue: await contextFactory(),
        rootValue: { execute, subscribe },
      };
      const errors = validate(args.schema, args.document);
      if (errors.length) return errors;
      return args;
    },
  },
  wss,
);

server.listen(0, '127.0.0.1', () => {
  console.log(JSON.stringify({ port: server.address().port, yoga_version: yogaVersion, graphql_ws_version: wsVersion }));
});

process.on('SIGTERM', () => process.exit(0));
