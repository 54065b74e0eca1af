/**
 * Flame graph data (pure, no DOM): stack trees merged per task group, and the layout of a
 * flame graph (depth, horizontal extent as fractions of the focused node) with zoom and
 * search.
 */

import { IStackTree } from './protocol';

/** A node of a merged stack tree. */
export interface IFlameNode {
  identifier: string;
  name: string;
  filename: string;
  line: number;
  /** Samples through this node (inclusive). */
  count: number;
  /** Samples at each line of the node's function, by line number (may be empty). */
  lines: Map<number, number>;
  children: IFlameNode[];
  /** Children by identifier, for merging. */
  index: Map<string, IFlameNode>;
}

/** An empty node. */
export function flameNode(
  identifier: string,
  name: string,
  filename = '',
  line = 0
): IFlameNode {
  return {
    identifier,
    name,
    filename,
    line,
    count: 0,
    lines: new Map(),
    children: [],
    index: new Map()
  };
}

function addLines(
  into: Map<number, number>,
  lines: Iterable<[number, number]>
): void {
  for (const [line, n] of lines) {
    into.set(line, (into.get(line) ?? 0) + n);
  }
}

function child(parent: IFlameNode, src: IStackTree): IFlameNode {
  let node = parent.index.get(src.identifier);
  if (!node) {
    node = flameNode(src.identifier, src.name, src.filename, src.line);
    parent.index.set(src.identifier, node);
    parent.children.push(node);
  }
  return node;
}

/** Add the samples of `tree` (a decoded stack tree) into `into`, matching by identifier. */
export function mergeStackTree(into: IFlameNode, tree: IStackTree): void {
  into.count += tree.count;
  addLines(into.lines, tree.lines);
  for (const c of tree.children) {
    mergeStackTree(child(into, c), c);
  }
}

/** Add the samples of merged tree `tree` into `into`. */
export function mergeFlame(into: IFlameNode, tree: IFlameNode): void {
  into.count += tree.count;
  addLines(into.lines, tree.lines);
  for (const c of tree.children) {
    let node = into.index.get(c.identifier);
    if (!node) {
      node = flameNode(c.identifier, c.name, c.filename, c.line);
      into.index.set(c.identifier, node);
      into.children.push(node);
    }
    mergeFlame(node, c);
  }
}

/** Nodes in a tree, root included. */
export function countNodes(node: IFlameNode): number {
  let n = 1;
  for (const c of node.children) {
    n += countNodes(c);
  }
  return n;
}

/** Identifier of the node standing for task group `group` under the flame root. */
export function groupIdentifier(group: string): string {
  return `group:${group}`;
}

/**
 * One root over several groups' trees: its children are the groups (named after them),
 * whose children are the groups' stacks. Trees are copied, never shared.
 */
export function combineGroups(
  trees: Map<string, IFlameNode>,
  groups?: Set<string>
): IFlameNode {
  const root = flameNode('root', 'all');
  for (const [group, tree] of trees) {
    if (groups && !groups.has(group)) {
      continue;
    }
    if (tree.count === 0) {
      continue;
    }
    const node = flameNode(groupIdentifier(group), group);
    mergeFlame(node, tree);
    root.index.set(node.identifier, node);
    root.children.push(node);
    root.count += node.count;
  }
  return root;
}

/** The nodes along identifier path `path` from the root (stops where a node is missing). */
export function findPath(root: IFlameNode, path: string[]): IFlameNode[] {
  const out = [root];
  let node = root;
  for (const id of path) {
    const next = node.index.get(id);
    if (!next) {
      break;
    }
    out.push(next);
    node = next;
  }
  return out;
}

/** One rectangle of a flame graph. */
export interface IFlameRect {
  node: IFlameNode;
  depth: number;
  /** Horizontal extent, as fractions of the width (0..1). */
  x0: number;
  x1: number;
  /** An ancestor of the focused node (drawn full width above it). */
  ancestor: boolean;
  /** Matches the search query. */
  matched: boolean;
  /** Identifier path from the root, for zooming. */
  path: string[];
}

/** Options of a flame layout. */
export interface IFlameLayoutOptions {
  /** Path of identifiers from the root to the focused (zoomed) node. */
  focus?: string[];
  /** Nodes narrower than this fraction are left out (with their children). */
  minFraction?: number;
  /** Case-insensitive text searched in function names and file names. */
  query?: string;
}

/** The laid-out flame graph. */
export interface IFlameLayout {
  rects: IFlameRect[];
  depth: number;
  /** Samples under the focused node. */
  total: number;
  /** Fraction of the focused node's samples under a node matching the query. */
  matchedFraction: number;
}

/** Whether `node` matches lower-cased `query`. */
export function matches(node: IFlameNode, query: string): boolean {
  return (
    query.length > 0 &&
    (node.name.toLowerCase().includes(query) ||
      node.filename.toLowerCase().includes(query))
  );
}

/** Lay out a flame graph: root at depth 0, children left to right, widths by samples. */
export function layoutFlame(
  root: IFlameNode,
  options: IFlameLayoutOptions = {}
): IFlameLayout {
  const minFraction = options.minFraction ?? 0;
  const query = (options.query ?? '').trim().toLowerCase();
  const chain = findPath(root, options.focus ?? []);
  const focus = chain[chain.length - 1];
  const rects: IFlameRect[] = [];
  const path: string[] = [];
  chain.forEach((node, depth) => {
    if (depth > 0) {
      path.push(node.identifier);
    }
    if (depth < chain.length - 1) {
      rects.push({
        node,
        depth,
        x0: 0,
        x1: 1,
        ancestor: true,
        matched: matches(node, query),
        path: path.slice()
      });
    }
  });
  let matchedSamples = 0;
  let maxDepth = chain.length - 1;
  const total = focus.count;
  const visit = (
    node: IFlameNode,
    depth: number,
    x0: number,
    nodePath: string[],
    inMatch: boolean
  ) => {
    const width = total > 0 ? node.count / total : 0;
    if (width < minFraction || width <= 0) {
      return;
    }
    const matched = matches(node, query);
    if (matched && !inMatch) {
      matchedSamples += node.count;
    }
    rects.push({
      node,
      depth,
      x0,
      x1: x0 + width,
      ancestor: false,
      matched,
      path: nodePath
    });
    maxDepth = Math.max(maxDepth, depth);
    let x = x0;
    for (const c of node.children) {
      visit(c, depth + 1, x, [...nodePath, c.identifier], inMatch || matched);
      x += total > 0 ? c.count / total : 0;
    }
  };
  visit(focus, chain.length - 1, 0, path.slice(), false);
  return {
    rects,
    depth: maxDepth + 1,
    total,
    matchedFraction: total > 0 ? matchedSamples / total : 0
  };
}
