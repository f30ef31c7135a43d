export * from './xupdate.js';
