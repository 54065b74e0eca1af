/**
 * The panel side of the protocol-version check, on the real Connection and Controller
 * classes over a fake kernel (no JupyterLab): the kernel's first answer decides the
 * connection; a kernel of another major version (its hello, or its refusal) leaves the
 * connection `incompatible` with a message saying what to install, and nothing the
 * kernel sends after that reaches the model.
 */

import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it, mock } from 'node:test';

import { Connection, ConnectionStatus, IIncoming } from '../src/connection';
import { Controller } from '../src/controller';
import { ProfileModel } from '../src/model';
import {
  BOOTSTRAP_CODE,
  COMM_TARGET,
  PROTOCOL_METADATA_KEY,
  PROTOCOL_VERSION
} from '../src/protocol';
import { fixture, groupsMessage, runStart } from './helpers';

// Connection listens for `pagehide` on window: node has no window, an EventTarget will do
const g = globalThis as unknown as { window?: EventTarget };
if (g.window === undefined) {
  g.window = new EventTarget();
}

/** A comm as Kernel.IKernelConnection.createComm returns it, recording what is sent. */
class FakeComm {
  constructor(readonly target: string) {}
  isDisposed = false;
  opened: { data: unknown; metadata: unknown } | null = null;
  sent: unknown[] = [];
  closed = false;
  onMsg: (msg: unknown) => void = () => undefined;
  onClose: (msg: unknown) => void = () => undefined;
  open(data: unknown, metadata: unknown): void {
    this.opened = { data, metadata };
  }
  send(data: unknown): void {
    this.sent.push(data);
  }
  close(): void {
    this.closed = true;
    this.isDisposed = true;
  }
  /** The kernel sends `data` (+ buffers) on this comm. */
  deliver(data: Record<string, unknown>, buffers: DataView[] = []): void {
    this.onMsg({ content: { comm_id: 'c', data }, buffers });
  }
}

/** A kernel whose bootstrap reply is `reply` (ok by default). */
class FakeKernel {
  constructor(
    readonly reply: Record<string, unknown> = { status: 'ok' },
    readonly id = 'kernel-1'
  ) {}
  executed: string[] = [];
  comms: FakeComm[] = [];
  requestExecute(content: { code: string }): {
    done: Promise<{ content: Record<string, unknown> }>;
  } {
    this.executed.push(content.code);
    return { done: Promise.resolve({ content: this.reply }) };
  }
  createComm(target: string): FakeComm {
    const comm = new FakeComm(target);
    this.comms.push(comm);
    return comm;
  }
  get comm(): FakeComm {
    assert.equal(this.comms.length, 1, 'one comm opened');
    return this.comms[0];
  }
}

function connection(kernel: FakeKernel): {
  conn: Connection;
  statuses: ConnectionStatus[];
  messages: IIncoming[];
} {
  const conn = new Connection(kernel as never);
  const statuses: ConnectionStatus[] = [];
  const messages: IIncoming[] = [];
  conn.statusChanged.connect((_, s) => statuses.push(s));
  conn.message.connect((_, m) => messages.push(m));
  return { conn, statuses, messages };
}

/** Messages of a run the kernel might stream after its first answer. */
function aRun(): Record<string, unknown>[] {
  return [
    runStart('r1'),
    groupsMessage('r1', ['inc']),
    { type: 'state', paused: true }
  ];
}

const newerHello = (): Record<string, unknown> => ({
  ...fixture('hello').data,
  protocol: '2.3'
});

let errors: ReturnType<typeof mock.method>;

beforeEach(() => {
  // the malformed-hello case logs on purpose; keep the output clean and countable
  errors = mock.method(console, 'error', () => undefined);
});

afterEach(() => {
  mock.restoreAll();
});

describe('connection: the kernel hello decides', () => {
  it('registers the target, opens the comm with its protocol version, connects on a 1.x hello', async () => {
    const kernel = new FakeKernel();
    const { conn, statuses, messages } = connection(kernel);
    await conn.connect();
    assert.deepEqual(kernel.executed, [BOOTSTRAP_CODE]);
    const comm = kernel.comm;
    assert.equal(comm.target, COMM_TARGET);
    assert.deepEqual(comm.opened, {
      data: { type: 'hello', client: 'jupyterlab', protocol: PROTOCOL_VERSION },
      metadata: { [PROTOCOL_METADATA_KEY]: PROTOCOL_VERSION }
    });
    assert.deepEqual(comm.opened?.data, fixture('panel_hello').data);
    assert.equal(conn.status, 'connecting');

    comm.deliver({ ...fixture('hello').data, protocol: '1.9' });
    assert.equal(conn.status, 'connected');
    assert.equal(conn.hello?.protocol, '1.9');
    assert.deepEqual(statuses, ['connecting', 'connected']);
    assert.equal(messages.length, 0, 'the hello itself is not passed on');

    for (const m of aRun()) {
      comm.deliver(m);
    }
    assert.deepEqual(
      messages.map(m => m.data.type),
      ['run_start', 'groups', 'state']
    );
    conn.send({ type: 'pause' });
    assert.deepEqual(comm.sent, [{ type: 'pause' }]);
    conn.dispose();
  });

  it('a 2.x hello: incompatible, with both versions and what to install; nothing after it is passed on', async () => {
    const kernel = new FakeKernel();
    const { conn, statuses, messages } = connection(kernel);
    await conn.connect();
    const comm = kernel.comm;
    comm.deliver(newerHello());
    assert.equal(conn.status, 'incompatible');
    assert.deepEqual(statuses, ['connecting', 'incompatible']);
    assert.equal(conn.hello, null);
    assert.match(conn.detail, /kernel speaks protocol 2\.3/);
    assert.match(conn.detail, new RegExp(`this panel ${PROTOCOL_VERSION}`));
    assert.match(conn.detail, /%pip install daskprofile -U/);

    comm.deliver(fixture('hello').data); // not even a compatible hello later
    for (const m of aRun()) {
      comm.deliver(m);
    }
    assert.equal(messages.length, 0);
    assert.equal(conn.status, 'incompatible');
    conn.send({ type: 'replay' });
    assert.deepEqual(comm.sent, [], 'no requests to an incompatible kernel');
    assert.equal(
      errors.mock.callCount(),
      0,
      'an incompatible kernel is no error'
    );
    conn.dispose();
  });

  it('a 0.x hello is refused too', async () => {
    const kernel = new FakeKernel();
    const { conn } = connection(kernel);
    await conn.connect();
    kernel.comm.deliver({ ...fixture('hello').data, protocol: '0.9' });
    assert.equal(conn.status, 'incompatible');
    assert.match(conn.detail, /protocol 0\.9/);
    conn.dispose();
  });

  it("the kernel's own refusal (error_protocol) is shown as the kernel words it", async () => {
    const kernel = new FakeKernel();
    const { conn, messages } = connection(kernel);
    await conn.connect();
    const refusal = fixture('error_protocol').data;
    kernel.comm.deliver(refusal);
    assert.equal(conn.status, 'incompatible');
    assert.equal(conn.detail, String(refusal.message));
    assert.match(conn.detail, /install matching/);
    for (const m of aRun()) {
      kernel.comm.deliver(m);
    }
    assert.equal(messages.length, 0);
    conn.dispose();
  });

  it('a malformed first answer is an error (logged), and nothing after it is passed on', async () => {
    const kernel = new FakeKernel();
    const { conn, messages } = connection(kernel);
    await conn.connect();
    kernel.comm.deliver({ type: 'hello', protocol: '1.0' });
    assert.equal(conn.status, 'error');
    assert.notEqual(conn.detail, '');
    assert.equal(errors.mock.callCount(), 1);
    assert.match(String(errors.mock.calls[0].arguments[0]), /daskprofile/);
    for (const m of aRun()) {
      kernel.comm.deliver(m);
    }
    assert.equal(messages.length, 0);
    conn.dispose();
  });

  it('a kernel without daskprofile: missing, with the import error; no comm opened', async () => {
    const kernel = new FakeKernel({
      status: 'error',
      ename: 'ModuleNotFoundError',
      evalue: "No module named 'daskprofile'"
    });
    const { conn, statuses } = connection(kernel);
    await conn.connect();
    assert.equal(conn.status, 'missing');
    assert.deepEqual(statuses, ['connecting', 'missing']);
    assert.equal(
      conn.detail,
      "ModuleNotFoundError: No module named 'daskprofile'"
    );
    assert.equal(kernel.comms.length, 0);
    conn.dispose();
  });
});

/** A KernelTracker stand-in: a fixed target and a signal nobody fires. */
function tracker(kernel: FakeKernel): never {
  return {
    target: { path: 'x.ipynb', kernel, kernelName: 'Python 3' },
    changed: { connect: () => true, disconnect: () => true }
  } as never;
}

/** Wait until the controller's connection has opened its comm. */
async function opened(kernel: FakeKernel): Promise<FakeComm> {
  for (let i = 0; i < 50 && kernel.comms.length === 0; i++) {
    await new Promise(resolve => setImmediate(resolve));
  }
  return kernel.comm;
}

describe('controller: an incompatible kernel feeds nothing to the model', () => {
  it('a compatible kernel: the run it sends reaches the model (the counterpart)', async () => {
    const kernel = new FakeKernel();
    const model = new ProfileModel();
    const controller = new Controller(tracker(kernel), model);
    controller.active = true;
    const comm = await opened(kernel);
    comm.deliver(fixture('hello').data);
    assert.equal(controller.connection?.status, 'connected');
    assert.ok(model.connected);
    for (const m of aRun()) {
      comm.deliver(m);
    }
    model.flush();
    assert.equal(model.runs.length, 1);
    assert.equal(model.current?.groupsByName.size, 1);
    assert.equal(model.paused, true);
    model.requestKeys(model.current!, []); // nothing to ask: no request
    model.setPaused(false);
    assert.deepEqual(comm.sent, [{ type: 'resume' }]);
    controller.dispose();
  });

  for (const [name, first] of [
    ['a 2.x hello', newerHello],
    ['the kernel refusal', () => fixture('error_protocol').data]
  ] as const) {
    it(`${name}: incompatible with a clear detail, no runs, no requests, nothing rejected`, async () => {
      const kernel = new FakeKernel();
      const model = new ProfileModel();
      const controller = new Controller(tracker(kernel), model);
      let changes = 0;
      controller.changed.connect(() => changes++);
      controller.active = true;
      const comm = await opened(kernel);
      comm.deliver(first());
      const conn = controller.connection!;
      assert.equal(conn.status, 'incompatible');
      assert.match(conn.detail, /install/);
      assert.ok(changes > 0, 'the panel is told to re-render');
      for (const m of aRun()) {
        comm.deliver(m);
      }
      model.flush();
      assert.equal(model.runs.length, 0);
      assert.equal(model.current, null);
      assert.equal(model.paused, false, 'the state message did not apply');
      assert.equal(model.rejected, 0);
      assert.equal(model.connected, false);
      model.setPaused(true);
      model.replay(null);
      assert.deepEqual(comm.sent, []);
      controller.dispose();
      assert.ok(comm.closed, 'the comm is closed when the controller goes');
    });
  }
});
